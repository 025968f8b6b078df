//! Sending a turn's request: one `POST` on the one HTTP client, for whole and streamed answers
//! alike, with the key and the configured headers; a whole answer read up to its cap and by serde.

use super::OpenAiModel;
use super::attempt_error::AttemptError;
use super::errors::closed_before_answer;
use super::wire::WireChunk;
use crate::llm::{Api, LlmError};
use crate::text::clip_bytes;
use crate::upstream::{Fault, MAX_ANSWER_BODY, read_capped, read_failure};

impl OpenAiModel {
    /// `POST` the body to the API's endpoint: the answer when it is a success, else its error.
    pub(super) async fn send(&self, body: Vec<u8>) -> Result<reqwest::Response, AttemptError> {
        let path = match self.cfg.api {
            Api::Chat => "/chat/completions",
            Api::Completions => "/completions",
        };
        // The connection is kept for the next turn (`ending.rs` reads a finished answer to its
        // end). One the server closed in the meantime is not reused: reqwest's pool drops it
        // when the close arrives, and a request sent just as it closed is sent again at once
        // (`retry.rs`).
        let response = self
            .http
            .post(format!("{}{path}", self.base_url))
            .headers(self.headers.clone())
            .body(body)
            .send()
            .await
            .map_err(|e| {
                let closed_early = closed_before_answer(&e);
                AttemptError {
                    closed_early,
                    ..self.fault(Fault::Io(e), 0)
                }
            })?;
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
