//! The models a server serves (`GET {base}/models`), so a user who names a server and no model
//! gets the one it serves (llama.cpp's `llama-server` always serves exactly one).
//!
//! The request goes over the client's one HTTP stack, like a turn: no redirect followed, the
//! key sent only as a turn would send it (this is the base URL a turn goes to), the answer read
//! up to 1 MiB, and the whole exchange bounded in time.

use std::time::Duration;

use serde_json::Value;

use super::OpenAiModel;
use super::errors::reqwest_error;
use super::transport::{Fault, MAX_PROBE_BODY, read_capped, read_failure};
use crate::llm::LlmError;
use crate::llm::error::names_no_api_version;
use crate::text::clip_bytes;

/// Longest the model list may take, from connecting to its last byte. A list is a few KiB, but
/// a server still loading a model may be slow to answer anything.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);

impl OpenAiModel {
    /// The ids of the models the server lists at `GET {base_url}/models`, in its order. The
    /// configured model name plays no part (it may be empty).
    ///
    /// Errors say what to do: a server that does not list its models (404 under a `/v1` base
    /// URL) asks for `--model`; a 404 under a base URL without an API version says to add
    /// `/v1`; an answer that is not OpenAI's `{"data": [{"id": …}]}` is
    /// [`LlmError::Malformed`]. Ids are the server's text: the caller neutralises them before
    /// showing them on a terminal.
    pub async fn served_models(&self) -> Result<Vec<String>, LlmError> {
        let url = &self.base_url;
        let mut req = self.http.get(format!("{url}/models")).timeout(LIST_TIMEOUT);
        if !self.cfg.api_key.is_empty() {
            req = req.bearer_auth(self.cfg.api_key.expose());
        }
        for (k, v) in &self.cfg.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let response = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                return Err(
                    reqwest_error(&e, url, self.cfg.read_timeout, 0).redacted(&self.redactor)
                );
            }
        };
        if !response.status().is_success() {
            let failure = read_failure(response).await;
            if failure.status == 404 && !names_no_api_version(url) {
                return Err(LlmError::Http {
                    status: 404,
                    url: url.clone(),
                    message: "it does not list its models (GET /models): pass --model NAME"
                        .to_owned(),
                });
            }
            return Err(self.fault(Fault::Status(failure), 0).err);
        }
        let body = match read_capped(response, MAX_PROBE_BODY, "the model list").await {
            Ok(body) => body,
            Err(fault) => return Err(self.fault(fault, 0).err),
        };
        model_ids(&body).ok_or_else(|| {
            LlmError::Malformed {
                url: url.clone(),
                reason: "the model list (GET /models) is not {\"data\": [{\"id\": …}, …]}".into(),
                snippet: clip_bytes(&String::from_utf8_lossy(&body), 200),
            }
            .redacted(&self.redactor)
        })
    }
}

/// The ids of an OpenAI model list (`{"data": [{"id": "…"}, …]}`); entries without a string id
/// are skipped. `None` when the body is not such a list.
fn model_ids(body: &[u8]) -> Option<Vec<String>> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let data = v.get("data")?.as_array()?;
    Some(
        data.iter()
            .filter_map(|m| m.get("id").and_then(Value::as_str))
            .map(str::to_owned)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::model_ids;

    #[test]
    fn ids_come_from_data() {
        assert_eq!(
            model_ids(br#"{"object":"list","data":[{"id":"a"},{"id":2},{"id":"b"}]}"#),
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
        assert_eq!(model_ids(br#"{"data":[]}"#), Some(vec![]));
        assert_eq!(model_ids(br#"{"models":[]}"#), None);
        assert_eq!(model_ids(b"<html>"), None);
    }
}
