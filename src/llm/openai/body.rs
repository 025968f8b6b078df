//! The request body of a turn: `model`, the prompt (`messages` or `prompt`), then the fields
//! (stops, sampling, the token-limit field, `stream`, vendor extras), all written by serde.

use serde::Serialize;
use serde_json::{Map, Value};

use super::OpenAiModel;
use crate::llm::{Api, LlmError, Message, Prompt, TurnRequest};

/// Most stop strings OpenAI accepts; more are enforced on our side only.
const MAX_SERVER_STOPS: usize = 4;

/// The stop strings a request sends the server, of the turn's `stops` (when it sends any).
pub(super) fn server_stops(stops: &[String]) -> impl Iterator<Item = &String> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .take(MAX_SERVER_STOPS)
}

/// The body as serde writes it straight from the request (a turn late in a run carries the
/// whole history: copying it into a JSON value first would double the work).
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    messages: Option<&'a [Message]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: Option<&'a str>,
    #[serde(flatten)]
    fields: &'a Map<String, Value>,
}

impl OpenAiModel {
    /// The JSON body the client would send for `req`, built without sending it: `stop` only with
    /// `send_stops` (at most four, empty ones dropped), `stream` as given. A prompt shape that does
    /// not match the client's API fails with [`LlmError::Config`].
    pub fn request_body(
        &self,
        req: &TurnRequest,
        send_stops: bool,
        stream: bool,
    ) -> Result<Value, LlmError> {
        let fields = self.request_fields(req, send_stops, stream)?;
        Ok(self.whole_body(req, fields))
    }

    /// `model`, the prompt (`messages` or `prompt`), then `fields`.
    pub(super) fn whole_body(&self, req: &TurnRequest, fields: Map<String, Value>) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.cfg.model.clone()));
        match &req.prompt {
            Prompt::Chat(messages) => {
                body.insert(
                    "messages".into(),
                    serde_json::to_value(messages).unwrap_or(Value::Null),
                );
            }
            Prompt::Text(text) => {
                body.insert("prompt".into(), Value::String(text.clone()));
            }
        }
        // A field of the configuration's `extra` may override even these.
        body.extend(fields);
        Value::Object(body)
    }

    /// Every field of the body but `model` and the prompt; checks that the prompt fits the API.
    pub(super) fn request_fields(
        &self,
        req: &TurnRequest,
        send_stops: bool,
        stream: bool,
    ) -> Result<Map<String, Value>, LlmError> {
        match (&req.prompt, self.cfg.api) {
            (Prompt::Chat(_), Api::Chat) | (Prompt::Text(_), Api::Completions) => {}
            (Prompt::Text(_), Api::Chat) => {
                return Err(LlmError::Config(
                    "a text prompt was given to a chat endpoint; use --api completions".into(),
                ));
            }
            (Prompt::Chat(_), Api::Completions) => {
                return Err(LlmError::Config(
                    "chat messages were given to a completions endpoint; use --api chat".into(),
                ));
            }
        }
        let mut body = Map::new();
        if send_stops {
            let stops: Vec<Value> = server_stops(&req.stop)
                .map(|s| Value::String(s.clone()))
                .collect();
            if !stops.is_empty() {
                body.insert("stop".into(), Value::Array(stops));
            }
        }
        if let Some(t) = req.temperature {
            body.insert("temperature".into(), Value::from(f64::from(t)));
        }
        if let Some(m) = req.max_tokens {
            body.insert(self.cfg.token_field.clone(), Value::from(m));
        }
        if let Some(s) = req.seed {
            body.insert("seed".into(), Value::from(s));
        }
        body.insert("stream".into(), Value::Bool(stream));
        if stream && self.cfg.include_usage {
            body.insert(
                "stream_options".into(),
                serde_json::json!({ "include_usage": true }),
            );
        }
        for (k, v) in self.cfg.extra.iter().chain(req.extra.iter()) {
            body.insert(k.clone(), v.clone());
        }
        Ok(body)
    }

    /// The body's bytes, the same JSON as [`OpenAiModel::request_body`] (serde writes them
    /// straight from the request's messages).
    pub(super) fn body_bytes(
        &self,
        req: &TurnRequest,
        fields: &Map<String, Value>,
    ) -> Result<Vec<u8>, LlmError> {
        let encode =
            |e: serde_json::Error| LlmError::Other(format!("cannot encode the request: {e}"));
        if ["model", "messages", "prompt"]
            .iter()
            .any(|k| fields.contains_key(*k))
        {
            // The configuration overrides one of them: the general path keeps its value (a
            // flattened field would repeat the key).
            return serde_json::to_vec(&self.whole_body(req, fields.clone())).map_err(encode);
        }
        let (messages, prompt) = match &req.prompt {
            Prompt::Chat(m) => (Some(m.as_slice()), None),
            Prompt::Text(t) => (None, Some(t.as_str())),
        };
        serde_json::to_vec(&Body {
            model: &self.cfg.model,
            messages,
            prompt,
            fields,
        })
        .map_err(encode)
    }
}
