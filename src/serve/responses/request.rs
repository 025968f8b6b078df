//! Reading a `POST /v1/responses` body (OpenAI's Responses API, the Open Responses
//! specification) into the shared request model.
//!
//! The body's fields are read with `serde`; the conversation (`items.rs`), the tools,
//! `tool_choice` and `text.format` (`tools.rs`) are written as a chat request and read by
//! [`Ask::read`], so that this face's requests meet the same checks and bounds as the others'
//! (schemas, tool count, message order and count). A refusal names the field as this API does
//! (`input[2].call_id`, `tools[1].parameters`, `text.format.schema`).
//!
//! Accepted and not used: `include`, `metadata` (echoed), `reasoning` (echoed), `truncation`,
//! `user`, `safety_identifier`, `prompt_cache_key`, `service_tier`, `top_p` (echoed),
//! `max_tool_calls` (echoed), `stream_options`. Refused: `background: true`, `conversation`,
//! `prompt` (stored prompts), which need state or work serve does not keep.

use serde::Deserialize;
use serde_json::{Value, json};

use super::items::to_messages;
use super::tools::{CallNames, read_choice, read_format, read_tools};
use crate::serve::ServeError;
use crate::serve::request::Ask;

fn bad(path: &str, message: impl std::fmt::Display) -> ServeError {
    ServeError::bad_request(format!("{path}: {message}"), path)
}

#[derive(Deserialize)]
struct Body {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    tools: Option<Vec<Value>>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    parallel_tool_calls: Option<bool>,
    #[serde(default)]
    max_output_tokens: Option<u32>,
    #[serde(default)]
    max_tool_calls: Option<u32>,
    #[serde(default)]
    temperature: Option<f32>,
    #[serde(default)]
    top_p: Option<f32>,
    #[serde(default)]
    text: Option<Value>,
    #[serde(default)]
    store: Option<bool>,
    #[serde(default)]
    previous_response_id: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    metadata: Option<Value>,
    #[serde(default)]
    reasoning: Option<Value>,
    #[serde(default)]
    background: Option<bool>,
    #[serde(default)]
    conversation: Option<Value>,
    #[serde(default)]
    prompt: Option<Value>,
}

/// What the response repeats of its request (the Responses object holds its settings).
#[derive(Debug, Clone, Default)]
pub(crate) struct Echo {
    pub instructions: Option<String>,
    pub tools: Vec<Value>,
    pub tool_choice: Value,
    pub text_format: Value,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub max_output_tokens: Option<u32>,
    pub max_tool_calls: Option<u32>,
    pub parallel_tool_calls: bool,
    pub metadata: Value,
    pub reasoning: Value,
    pub previous_response_id: Option<String>,
    pub store: bool,
}

/// A request read.
pub(crate) struct Parsed {
    pub ask: Ask,
    pub echo: Echo,
    /// The tools whose calls are not plain function calls (custom, in a namespace).
    pub names: CallNames,
    /// What was left out of the request (built-in tools), in words.
    pub warnings: Vec<String>,
    /// This request's input items (a string input as one user message).
    pub input: Vec<Value>,
}

/// The `previous_response_id` a body names, read before the body is (its conversation is
/// loaded first).
pub(crate) fn previous_id(body: &Value) -> Option<&str> {
    body.get("previous_response_id").and_then(Value::as_str)
}

/// Read a Responses request whose earlier conversation (the items of the responses it
/// continues, with their output) is `history`.
pub(crate) fn read(body: &Value, history: Vec<Value>) -> Result<Parsed, ServeError> {
    let b: Body = serde_path_to_error::deserialize(body.clone()).map_err(|e| {
        let path = e.path().to_string();
        bad(&path, e.into_inner())
    })?;
    if b.background == Some(true) {
        return Err(bad("background", "background responses are not supported"));
    }
    if b.conversation.as_ref().is_some_and(|c| !c.is_null()) {
        return Err(bad(
            "conversation",
            "conversations are not supported: continue with previous_response_id",
        ));
    }
    if b.prompt.as_ref().is_some_and(|p| !p.is_null()) {
        return Err(bad("prompt", "stored prompts are not supported"));
    }
    if b.max_output_tokens == Some(0) {
        return Err(bad("max_output_tokens", "must be at least 1"));
    }
    let input = match b.input {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![json!({"type": "message", "role": "user", "content": s})],
        Some(Value::Array(items)) => items,
        Some(_) => return Err(bad("input", "must be a string or an array of items")),
    };
    let mut tools = read_tools(b.tools.unwrap_or_default())?;
    let (choice, choice_echo) = read_choice(b.tool_choice, &mut tools)?;
    let (format, format_echo) = read_format(b.text.as_ref())?;
    let first = history.len();
    let mut items = history;
    items.extend(input.iter().cloned());
    let conversation = to_messages(b.instructions.as_deref(), items, first)?;
    let parallel = b.parallel_tool_calls.unwrap_or(true);
    // Built by moving the conversation in (`json!` would serialize a copy of it).
    let mut chat = json!({
        "model": b.model,
        "tool_choice": choice,
        "parallel_tool_calls": parallel,
        "response_format": format,
        "stream": b.stream.unwrap_or(false),
        "temperature": b.temperature,
        "max_completion_tokens": b.max_output_tokens,
    });
    chat["messages"] = Value::Array(conversation.messages);
    chat["tools"] = Value::Array(tools.chat);
    let ask = Ask::read_owned(chat).map_err(|e| rename(e, &conversation.origin, &tools.index))?;
    let echo = Echo {
        instructions: b.instructions,
        tools: tools.echo,
        tool_choice: choice_echo,
        text_format: format_echo,
        temperature: b.temperature,
        top_p: b.top_p,
        max_output_tokens: b.max_output_tokens,
        max_tool_calls: b.max_tool_calls,
        parallel_tool_calls: parallel,
        metadata: b.metadata.filter(|m| m.is_object()).unwrap_or(json!({})),
        reasoning: b.reasoning.unwrap_or(Value::Null),
        previous_response_id: b.previous_response_id,
        store: b.store.unwrap_or(true),
    };
    Ok(Parsed {
        ask,
        echo,
        names: tools.names,
        warnings: tools.warnings,
        input,
    })
}

/// A refusal of the shared reading, its field named as this API names it.
fn rename(e: ServeError, origin: &[String], tools: &[usize]) -> ServeError {
    let (message, param) = match e {
        ServeError::BadRequest {
            message,
            param: Some(param),
        } => (message, param),
        other => return other,
    };
    let indexed = |rest: &str| -> Option<(usize, String)> {
        let (index, tail) = rest.split_once(']')?;
        Some((
            index.parse().ok()?,
            tail.trim_start_matches('.').to_string(),
        ))
    };
    let path = if let Some(rest) = param.strip_prefix("messages[") {
        match indexed(rest) {
            Some((i, _)) => origin.get(i).cloned().unwrap_or_else(|| "input".into()),
            None => "input".into(),
        }
    } else if param == "messages" {
        "input".into()
    } else if let Some(rest) = param.strip_prefix("tools[") {
        match indexed(rest) {
            Some((i, tail)) => {
                let at = tools.get(i).copied().unwrap_or(i);
                let tail = tail.trim_start_matches("function.");
                format!("tools[{at}].{tail}")
            }
            None => "tools".into(),
        }
    } else {
        param
            .replace("response_format.json_schema", "text.format")
            .replace("response_format", "text.format")
            .replace("tool_choice.function.name", "tool_choice.name")
    };
    ServeError::bad_request(message, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: Value) -> ServeError {
        match read(&body, Vec::new()) {
            Err(e) => e,
            Ok(_) => panic!("accepted: {body}"),
        }
    }

    fn param(e: &ServeError) -> String {
        match e {
            ServeError::BadRequest { param, .. } => param.clone().unwrap_or_default(),
            other => panic!("not a 400: {other}"),
        }
    }

    #[test]
    fn refusals_name_the_field_as_the_responses_api_does() {
        let schema_bad = json!({"input": "hi", "tools": [{"type": "web_search"},
            {"type": "function", "name": "t", "parameters": {"type": "string"}}]});
        assert_eq!(param(&err(schema_bad)), "tools[1].parameters");
        let orphan = json!({"input": [{"role": "user", "content": "hi"},
            {"type": "function_call_output", "call_id": "nope", "output": "1"}]});
        assert_eq!(param(&err(orphan)), "input[1]");
        let format = json!({"input": "hi", "text": {"format": {"type": "json_schema",
            "name": "a", "schema": {"type": "object", "properties": {"a": {"pattern": "("}}}}}});
        assert_eq!(param(&err(format)), "text.format.schema");
        let typed = json!({"input": "hi", "max_output_tokens": "many"});
        assert_eq!(param(&err(typed)), "max_output_tokens");
    }

    #[test]
    fn a_string_input_with_instructions_is_a_question_under_a_role() {
        let body = json!({"input": "What is 2+2?", "instructions": "Be brief.",
            "tools": [{"type": "function", "name": "calc", "parameters": {"type": "object"}}],
            "tool_choice": {"type": "function", "name": "calc"}, "max_output_tokens": 64,
            "parallel_tool_calls": false});
        let parsed = read(&body, Vec::new()).unwrap();
        assert_eq!(parsed.ask.instructions, "Be brief.");
        assert_eq!(parsed.ask.max_tokens, Some(64));
        assert!(!parsed.ask.parallel);
        assert_eq!(
            parsed.echo.tool_choice,
            json!({"type": "function", "name": "calc"})
        );
        assert!(parsed.echo.store);
        assert_eq!(parsed.input.len(), 1);
    }
}
