//! Sending a turn's request: one `POST` on the one HTTP client, for whole and streamed answers
//! alike, with the key and the configured headers; a whole answer read up to its cap and by serde.

use reqwest::header::CONNECTION;

use super::OpenAiModel;
use super::attempt_error::AttemptError;
use super::wire::WireChunk;
use crate::llm::{Api, LlmError};
use crate::text::clip_bytes;
use crate::upstream::{Fault, MAX_ANSWER_BODY, read_capped, read_failure};

impl OpenAiModel {
    /// `POST` the body to the API's endpoint: the answer when it is a success, else its error.
    pub(super) async fn send(
        &self,
        body: Vec<u8>,
        stream: bool,
    ) -> Result<reqwest::Response, AttemptError> {
        let path = match self.cfg.api {
            Api::Chat => "/chat/completions",
            Api::Completions => "/completions",
        };
        let mut request = self
            .http
            .post(format!("{}{path}", self.base_url))
            .headers(self.headers.clone());
        // llama-server closes a connection after a streamed answer without saying so, and the
        // next request sent on it fails and waits for a retry (a third of the lab's turns did).
        // Over plain HTTP (a local server) a new connection costs next to nothing: ask for the
        // close, so the connection is never reused. Over TLS the connection is kept.
        if stream && self.base_url.starts_with("http://") {
            request = request.header(CONNECTION, "close");
        }
        let response = request
            .body(body)
            .send()
            .await
            .map_err(|e| self.fault(Fault::Io(e), 0))?;
        if !response.status().is_success() {
            return Err(self.fault(Fault::Status(read_failure(response).await), 0));
        }
        Ok(response)
    }

    /// A whole (non-streamed) answer: read up to its cap, then by serde.
    pub(super) async fn whole(
        &self,
        response: reqwest::Response,
    ) -> Result<WireChunk, AttemptError> {
        let body = read_capped(response, MAX_ANSWER_BODY, "the answer")
            .await
            .map_err(|f| self.fault(f, 0))?;
        serde_json::from_slice(&body).map_err(|e| {
            let err = LlmError::Malformed {
                url: self.base_url.clone(),
                reason: e.to_string(),
                snippet: clip_bytes(&String::from_utf8_lossy(&body), 200),
            };
            AttemptError::from(err.redacted(&self.redactor))
        })
    }
}
