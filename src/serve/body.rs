//! The body of a `POST /v1/chat/completions` as `serde` types: what each field may be, read in
//! one pass by [`read_body`], whose refusal names the failing field in OpenAI's form
//! (`messages[2].tool_calls[0].id`, `stream_options.include_usage`) through
//! `serde_path_to_error`. What types cannot say (a tool declared twice, a role out of order, a
//! schema that does not compile) is checked after, in `request.rs`, with the same names.
//!
//! Fields the core does not use (`user`, `logprobs`, `metadata`, …) are accepted and ignored;
//! `null` is the same as a missing field.

use serde::Deserialize;
use serde_json::Value;

use super::ServeError;

/// The request body.
#[derive(Debug, Deserialize)]
pub(crate) struct Body {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub messages: Option<Vec<Message>>,
    #[serde(default)]
    pub tools: Option<Vec<Tool>>,
    #[serde(default)]
    pub tool_choice: Option<ToolChoice>,
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
    #[serde(default)]
    pub response_format: Option<ResponseFormat>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub max_completion_tokens: Option<u32>,
    #[serde(default)]
    pub seed: Option<i64>,
    #[serde(default)]
    pub n: Option<u64>,
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    System,
    Developer,
    User,
    Assistant,
    Tool,
}

/// One message. `role` is optional here so that its absence is named `messages[i].role`.
#[derive(Debug, Deserialize)]
pub(crate) struct Message {
    #[serde(default)]
    pub role: Option<Role>,
    #[serde(default)]
    pub content: Option<Content>,
    #[serde(default)]
    pub reasoning_content: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

/// A message's content: its text, or parts (of which only text parts are read).
#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "content must be a string or an array of parts")]
pub(crate) enum Content {
    Text(String),
    Parts(Vec<Part>),
}

/// A content part; one without `text` (an image) is refused by name.
#[derive(Debug, Deserialize)]
pub(crate) struct Part {
    #[serde(default)]
    pub text: Option<String>,
}

/// A call of an assistant message in the history.
#[derive(Debug, Deserialize)]
pub(crate) struct ToolCall {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<CalledFunction>,
}

/// The function a past call called; `arguments` is JSON text (an object is taken too).
#[derive(Debug, Deserialize)]
pub(crate) struct CalledFunction {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub arguments: Option<Value>,
}

/// A declared tool.
#[derive(Debug, Deserialize)]
pub(crate) struct Tool {
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub function: Option<Function>,
}

/// A function tool's declaration.
#[derive(Debug, Deserialize)]
pub(crate) struct Function {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub parameters: Option<Value>,
}

/// `tool_choice`: a mode's name, or a function by name.
#[derive(Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "expected auto, required, none or {\"type\": \"function\", \"function\": {\"name\": …}}"
)]
pub(crate) enum ToolChoice {
    Mode(String),
    Function { function: NamedFunction },
}

/// The function `tool_choice` names.
#[derive(Debug, Deserialize)]
pub(crate) struct NamedFunction {
    pub name: String,
}

/// `response_format`; `type` is read by name so that an unknown one is named
/// `response_format.type`.
#[derive(Debug, Deserialize)]
pub(crate) struct ResponseFormat {
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub json_schema: Option<JsonSchema>,
}

/// `response_format.json_schema`.
#[derive(Debug, Deserialize)]
pub(crate) struct JsonSchema {
    #[serde(default)]
    pub schema: Option<Value>,
}

/// `stream_options`.
#[derive(Debug, Deserialize)]
pub(crate) struct StreamOptions {
    #[serde(default)]
    pub include_usage: Option<bool>,
}

/// Read `body` as a [`Body`]; a field of the wrong type is a 400 naming it.
pub(crate) fn read_body<'de, D>(body: D) -> Result<Body, ServeError>
where
    D: serde::Deserializer<'de>,
    D::Error: std::fmt::Display,
{
    serde_path_to_error::deserialize(body).map_err(|e| {
        let param = e.path().to_string();
        let message = e.into_inner().to_string();
        if param == "." {
            ServeError::BadRequest {
                message,
                param: None,
            }
        } else {
            ServeError::bad_request(message, param)
        }
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn param(body: Value) -> Option<String> {
        match read_body(&body) {
            Err(ServeError::BadRequest { param, .. }) => param,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_wrong_type_is_named_by_its_path() {
        assert_eq!(param(json!({"stream": "yes"})).as_deref(), Some("stream"));
        assert_eq!(
            param(json!({"messages": [{"role": "user"}, {"role": "assistant", "tool_calls": [{"id": 7}]}]}))
                .as_deref(),
            Some("messages[1].tool_calls[0].id")
        );
        assert_eq!(
            param(json!({"stream_options": {"include_usage": 1}})).as_deref(),
            Some("stream_options.include_usage")
        );
        assert_eq!(
            param(json!({"messages": [{"role": "robot"}]})).as_deref(),
            Some("messages[0].role")
        );
    }

    #[test]
    fn nulls_and_unknown_fields_are_accepted() {
        let b = read_body(&json!({"stream": null, "user": "u1", "logprobs": false,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}))
        .unwrap();
        assert_eq!(b.stream, None);
        assert!(matches!(
            b.messages.unwrap()[0].content,
            Some(Content::Parts(_))
        ));
    }
}
