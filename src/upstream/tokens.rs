//! Counting a prompt's tokens with the server's own tokenizer, for the servers that have one
//! (each at its root, beside `/v1`):
//!
//! * **llama.cpp**: `POST /tokenize {"content": TEXT, "add_special": true}` answers the token ids
//!   (`{"tokens": [...]}`), counted here. A chat is first put in the model's chat template by
//!   `POST /apply-template {"messages": [...]}` (`{"prompt": TEXT}`), so the count is that of the
//!   text the server really decodes, role markers and all.
//! * **vLLM**: `POST /tokenize` with `{"model", "prompt"}` or `{"model", "messages"}` (the chat
//!   template applied by the server) answers `count`.
//! * **SGLang**: `POST /tokenize {"model", "prompt"}` for text; a chat is not counted.
//!
//! Any other server, or a chat on SGLang, has no count (`Ok(None)`) and no request is made. A
//! server that answers 404 (or 405, 501) has no tokenizer there: the client remembers it and
//! never asks again. The key goes in the `Authorization` header only (a keyed llama.cpp guards
//! these endpoints too), the request has a short timeout, and an answer is read up to a cap in
//! proportion to what was sent (a token id is at most 8 bytes of JSON, and a text has at most
//! one token per byte), never more.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::http::{MAX_ANSWER_BODY, MAX_PROBE_BODY};
use super::kind::ServerKind;
use super::{Upstream, UpstreamError};
use crate::text::clip_bytes;

/// Longest a count may take (tokenising is fast: it waits for no slot).
const COUNT_TIMEOUT: Duration = Duration::from_secs(10);

/// What to count: a chat (its messages as the API takes them) or a text.
#[derive(Debug, Clone, Copy)]
pub enum Tokenize<'a, M> {
    /// Chat messages; `continued`: the chat ends in the assistant's own message, which the
    /// server continues (prefill), so the template must not open a new turn after it.
    Chat {
        /// The messages.
        messages: &'a [M],
        /// Whether the last message is continued.
        continued: bool,
    },
    /// A plain text prompt.
    Text(&'a str),
}

/// The body of a count request.
#[derive(Serialize)]
#[serde(bound = "M: Serialize")]
struct CountBody<'a, M> {
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    messages: Option<&'a [M]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    add_special: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    add_generation_prompt: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    continue_final_message: Option<bool>,
}

impl<M> Default for CountBody<'_, M> {
    fn default() -> Self {
        CountBody {
            model: None,
            messages: None,
            prompt: None,
            content: None,
            add_special: None,
            add_generation_prompt: None,
            continue_final_message: None,
        }
    }
}

/// A tokenizer's answer: vLLM's `count`, or the `tokens` list (counted, never kept).
#[derive(Deserialize)]
struct Counted {
    #[serde(default)]
    count: Option<u64>,
    #[serde(default)]
    tokens: Option<Length>,
}

/// The length of a JSON array, read without keeping its items.
struct Length(u64);

impl<'de> Deserialize<'de> for Length {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Count;
        impl<'de> Visitor<'de> for Count {
            type Value = Length;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of tokens")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Length, A::Error> {
                let mut n = 0;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Length(n))
            }
        }
        d.deserialize_seq(Count)
    }
}

/// `/apply-template`'s answer.
#[derive(Deserialize)]
struct Templated {
    prompt: String,
}

/// The largest answer read for a request of `sent` bytes: 1 MiB, plus 8 bytes a byte sent, up to
/// four times the cap of a whole turn's answer.
fn cap_for(sent: usize) -> usize {
    MAX_PROBE_BODY
        .saturating_add(sent.saturating_mul(8))
        .min(4 * MAX_ANSWER_BODY)
}

impl Upstream {
    /// The prompt's length in the server's own tokens; `Ok(None)`: this server cannot count it
    /// (see the module docs).
    pub async fn count<M: Serialize>(
        &self,
        prompt: Tokenize<'_, M>,
    ) -> Result<Option<u64>, UpstreamError> {
        if self.no_tokenizer.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let kind = self.kind().await;
        let model = Some(self.endpoint.model.as_str());
        let counted = match (kind, prompt) {
            (ServerKind::LlamaCpp, Tokenize::Chat { messages, .. }) => {
                let body = CountBody {
                    messages: Some(messages),
                    ..CountBody::default()
                };
                match self
                    .post_count::<Templated, M>("/apply-template", &body)
                    .await
                {
                    Ok(t) => self.llama_tokenize(&t.prompt).await,
                    Err(e) => Err(e),
                }
            }
            (ServerKind::LlamaCpp, Tokenize::Text(text)) => self.llama_tokenize(text).await,
            (
                ServerKind::Vllm,
                Tokenize::Chat {
                    messages,
                    continued,
                },
            ) => {
                let body = CountBody {
                    model,
                    messages: Some(messages),
                    add_generation_prompt: Some(!continued),
                    continue_final_message: continued.then_some(true),
                    ..CountBody::default()
                };
                self.tokenize(&body).await
            }
            (ServerKind::Vllm | ServerKind::Sglang, Tokenize::Text(text)) => {
                let body = CountBody::<M> {
                    model,
                    prompt: Some(text),
                    ..CountBody::default()
                };
                self.tokenize(&body).await
            }
            _ => return Ok(None),
        };
        match counted {
            Ok(n) => Ok(Some(n)),
            Err(e) if matches!(e.status(), Some(404 | 405 | 501)) => {
                // Only the status is logged: the body is the server's text (it may echo the key).
                tracing::info!(server = %kind, url = %self.endpoint.base_url, status = ?e.status(), "the server has no tokenizer endpoint; token counts are estimated from now on");
                self.no_tokenizer.store(true, Ordering::Relaxed);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// llama.cpp's count of `text`, special tokens (BOS) added as for a turn.
    async fn llama_tokenize(&self, text: &str) -> Result<u64, UpstreamError> {
        let body = CountBody::<()> {
            content: Some(text),
            add_special: Some(true),
            ..CountBody::default()
        };
        self.tokenize(&body).await
    }

    /// `POST /tokenize`, counted.
    async fn tokenize<M: Serialize>(&self, body: &CountBody<'_, M>) -> Result<u64, UpstreamError> {
        let counted = self.post_count::<Counted, M>("/tokenize", body).await?;
        counted
            .count
            .or(counted.tokens.map(|t| t.0))
            .ok_or_else(|| UpstreamError::Malformed {
                reason: "/tokenize answered neither `count` nor `tokens`".into(),
                snippet: String::new(),
            })
    }

    /// POST `body` to `path` at the server's root and read the answer as `T`.
    async fn post_count<T: for<'de> Deserialize<'de>, M: Serialize>(
        &self,
        path: &str,
        body: &CountBody<'_, M>,
    ) -> Result<T, UpstreamError> {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| UpstreamError::Unexpected(format!("cannot encode the request: {e}")))?;
        let cap = cap_for(bytes.len());
        let request = self
            .http
            .post(format!("{}{path}", self.root()))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(bytes);
        let answer = self.send_capped(request, true, COUNT_TIMEOUT, cap).await?;
        serde_json::from_slice(&answer).map_err(|e| UpstreamError::Malformed {
            reason: format!("{path}: {e}"),
            snippet: clip_bytes(&String::from_utf8_lossy(&answer), 200),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_lists_are_counted_and_counts_read() {
        let c: Counted =
            serde_json::from_str(r#"{"tokens":[1,2,3,{"id":4,"piece":"x"}]}"#).unwrap();
        assert_eq!(c.tokens.map(|t| t.0), Some(4));
        let c: Counted =
            serde_json::from_str(r#"{"count":7,"max_model_len":2048,"tokens":[1]}"#).unwrap();
        assert_eq!(c.count, Some(7));
        assert!(serde_json::from_str::<Counted>(r#"{"tokens":"x"}"#).is_err());
    }

    #[test]
    fn the_answer_cap_grows_with_what_was_sent_up_to_a_ceiling() {
        assert_eq!(cap_for(0), MAX_PROBE_BODY);
        assert_eq!(cap_for(1000), MAX_PROBE_BODY + 8000);
        assert_eq!(cap_for(usize::MAX), 4 * MAX_ANSWER_BODY);
    }
}
