//! This face's renderer and what it keeps (its [`Render`] impl is `answer.rs`, above this file and
//! `stream.rs`): under `store`, the answered response kept (`store.rs`) before the client learns
//! it is complete, so that a `previous_response_id` sent the moment after finds it.

use std::sync::Arc;

use serde_json::Value;

use super::request::Echo;
use super::resource::About;
use super::store::{Owner, Record, Store, now};
use super::tools::CallNames;
use crate::secret::Redactor;
use crate::serve::response::AnswerMeta;

/// How a completed response is kept.
pub(crate) struct Saver {
    pub store: Store,
    pub owner: Owner,
    /// This request's input items (redacted when kept).
    pub input: Vec<Value>,
    /// The upstream key's redactor: nothing kept holds the key.
    pub redactor: Redactor,
}

impl Saver {
    /// Keep `response` (a completed or incomplete one), off the async threads; a failure is
    /// logged (the client has its answer; only the continuation will be missing).
    pub(crate) async fn save(&self, response: &Value) {
        let id = response["id"].as_str().unwrap_or_default().to_string();
        let mut input = Value::Array(self.input.clone());
        self.redactor.redact_json(&mut input);
        let mut response = response.clone();
        self.redactor.redact_json(&mut response);
        let record = Record {
            owner: self.owner.as_str().to_string(),
            created: now(),
            previous: response["previous_response_id"]
                .as_str()
                .map(str::to_string),
            input: match input {
                Value::Array(items) => items,
                _ => Vec::new(),
            },
            response,
        };
        let store = self.store.clone();
        let kept = tokio::task::spawn_blocking(move || store.put(&id, &record)).await;
        match kept {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => {
                tracing::warn!("a response was too large for the store's bound; it was not kept")
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "a response could not be stored"),
            Err(_) => tracing::warn!("storing a response failed"),
        }
    }
}

/// How this face renders one request's answer.
pub(crate) struct ResponsesRender {
    pub echo: Echo,
    pub names: CallNames,
    pub warnings: Vec<String>,
    /// Set when the request asked for `store` (the default).
    pub saver: Option<Arc<Saver>>,
}

impl ResponsesRender {
    pub(crate) fn about<'a>(&'a self, meta: &'a AnswerMeta) -> About<'a> {
        About {
            meta,
            echo: &self.echo,
            warnings: &self.warnings,
        }
    }
}
