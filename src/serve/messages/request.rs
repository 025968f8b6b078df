//! Reading a `POST /v1/messages` body (Anthropic's Messages API) into the shared request model.
//!
//! The body is read with `serde` types, level by level, so that a refusal names its field in
//! Anthropic's dotted form (`messages.2.content.0.tool_use_id: …`). The request is then written
//! as the OpenAI face's request (system message, user/assistant/tool messages, `tools`,
//! `tool_choice`, `parallel_tool_calls`) and read by [`Ask::read`]: both faces become the same
//! conversation under the same checks (tool schemas, message order, limits).

use std::collections::HashMap;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::serve::ServeError;
use crate::serve::request::Ask;

/// Most stop sequences one request may give.
const MAX_STOPS: usize = 16;
/// Longest stop sequence, in bytes.
const MAX_STOP_BYTES: usize = 256;

/// A request read: the shared model, and what only this face renders.
pub(crate) struct Parsed {
    pub ask: Ask,
    /// Whether the client asked for thinking (`thinking.type` other than `disabled`): the
    /// thought then goes out as `thinking` blocks, else it is dropped.
    pub thinking: bool,
    /// The client's `stop_sequences`.
    pub stops: Vec<String>,
}

#[derive(Deserialize)]
struct Body {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    max_tokens: Option<Value>,
    #[serde(default)]
    messages: Option<Vec<Value>>,
    #[serde(default)]
    system: Option<Value>,
    #[serde(default)]
    tools: Option<Vec<Value>>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    stop_sequences: Option<Vec<String>>,
    #[serde(default)]
    temperature: Option<f32>,
    /// Accepted (`user_id`) and not used.
    #[serde(default)]
    #[allow(dead_code)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    thinking: Option<Thinking>,
}

#[derive(Deserialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Speaker {
    User,
    Assistant,
    /// More instructions in the conversation (Claude Code sends them): joined to `system`.
    System,
}

#[derive(Deserialize)]
struct Message {
    role: Speaker,
    content: Value,
}

/// A content block of a message.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
    },
    /// Kept by clients that replay a conversation; nothing of it can be read.
    RedactedThinking {},
    ToolUse {
        id: String,
        name: String,
        input: Map<String, Value>,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default)]
        content: Option<Value>,
        #[serde(default)]
        is_error: bool,
    },
}

#[derive(Deserialize)]
struct Tool {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    input_schema: Option<Value>,
    #[serde(rename = "type", default)]
    kind: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ToolChoice {
    Auto {
        #[serde(default)]
        disable_parallel_tool_use: bool,
    },
    Any {
        #[serde(default)]
        disable_parallel_tool_use: bool,
    },
    Tool {
        name: String,
        #[serde(default)]
        disable_parallel_tool_use: bool,
    },
    None {},
}

fn bad(path: &str, message: impl std::fmt::Display) -> ServeError {
    ServeError::bad_request(format!("{path}: {message}"), path)
}

fn typed<T: DeserializeOwned>(value: Value, path: &str) -> Result<T, ServeError> {
    serde_json::from_value(value).map_err(|e| bad(path, e))
}

/// Read a Messages request. `create` is true for `/v1/messages` (where `max_tokens` is
/// required), false for `/v1/messages/count_tokens`.
pub(crate) fn read(body: &Value, create: bool) -> Result<Parsed, ServeError> {
    let b: Body = typed(body.clone(), "body")?;
    let max_tokens = match &b.max_tokens {
        None | Some(Value::Null) if create => return Err(bad("max_tokens", "is required")),
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .filter(|n| *n >= 1)
                .map(|n| n.min(u64::from(u32::MAX)) as u32)
                .ok_or_else(|| bad("max_tokens", "must be an integer of at least 1"))?,
        ),
    };
    let stops = b.stop_sequences.unwrap_or_default();
    if stops.len() > MAX_STOPS {
        return Err(bad("stop_sequences", format!("at most {MAX_STOPS}")));
    }
    if let Some(i) = stops
        .iter()
        .position(|s| s.is_empty() || s.len() > MAX_STOP_BYTES)
    {
        return Err(bad(
            &format!("stop_sequences.{i}"),
            format!("must hold 1 to {MAX_STOP_BYTES} bytes"),
        ));
    }
    let tools = read_tools(b.tools.unwrap_or_default())?;
    let (choice, parallel) = read_choice(b.tool_choice, &tools)?;
    let mut messages: Vec<Value> = Vec::new();
    // The Anthropic field each OpenAI message comes from, to name it in a refusal.
    let mut origin: Vec<String> = Vec::new();
    if let Some(system) = b.system {
        let text = text_of(system, "system")?;
        if !text.is_empty() {
            messages.push(json!({"role": "system", "content": text}));
            origin.push("system".into());
        }
    }
    read_messages(b.messages.unwrap_or_default(), &mut messages, &mut origin)?;
    let openai = json!({
        "model": b.model,
        "messages": messages,
        "tools": tools,
        "tool_choice": choice,
        "parallel_tool_calls": parallel,
        "stream": b.stream.unwrap_or(false),
        "temperature": b.temperature,
        "max_tokens": max_tokens,
    });
    let ask = Ask::read(&openai).map_err(|e| rename(e, &origin))?;
    Ok(Parsed {
        ask,
        thinking: b.thinking.is_some_and(|t| t.kind != "disabled"),
        stops,
    })
}

/// Anthropic's tools as OpenAI function tools.
fn read_tools(tools: Vec<Value>) -> Result<Vec<Value>, ServeError> {
    let mut out = Vec::with_capacity(tools.len());
    for (i, t) in tools.into_iter().enumerate() {
        let path = format!("tools.{i}");
        let t: Tool = typed(t, &path)?;
        if t.kind.as_deref().is_some_and(|k| k != "custom") {
            return Err(bad(
                &format!("{path}.type"),
                "only client tools (name, description, input_schema) are supported",
            ));
        }
        let schema = t
            .input_schema
            .ok_or_else(|| bad(&format!("{path}.input_schema"), "is required"))?;
        out.push(json!({"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": schema}}));
    }
    Ok(out)
}

/// `tool_choice` as OpenAI's, and whether calls may come in parallel.
fn read_choice(choice: Option<Value>, tools: &[Value]) -> Result<(Value, bool), ServeError> {
    let Some(choice) = choice.filter(|c| !c.is_null()) else {
        return Ok((Value::Null, true));
    };
    Ok(match typed(choice, "tool_choice")? {
        ToolChoice::Auto {
            disable_parallel_tool_use,
        } => (json!("auto"), !disable_parallel_tool_use),
        ToolChoice::Any {
            disable_parallel_tool_use,
        } => {
            if tools.is_empty() {
                return Err(bad("tool_choice", "`any` needs tools"));
            }
            (json!("required"), !disable_parallel_tool_use)
        }
        ToolChoice::Tool {
            name,
            disable_parallel_tool_use,
        } => {
            if !tools.iter().any(|t| t["function"]["name"] == name.as_str()) {
                return Err(bad(
                    "tool_choice.name",
                    format!("`{name}` is not among the tools"),
                ));
            }
            let choice = json!({"type": "function", "function": {"name": name}});
            (choice, !disable_parallel_tool_use)
        }
        ToolChoice::None {} => (json!("none"), true),
    })
}

/// The text of `system` or of a `tool_result`'s `content`: a string, or text blocks (joined by
/// blank lines).
fn text_of(value: Value, path: &str) -> Result<String, ServeError> {
    match value {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s),
        Value::Array(blocks) => {
            let mut parts = Vec::with_capacity(blocks.len());
            for (j, block) in blocks.into_iter().enumerate() {
                let p = format!("{path}.{j}");
                match typed::<Block>(block, &p)? {
                    Block::Text { text } => parts.push(text),
                    _ => return Err(bad(&p, "only text blocks are supported here")),
                }
            }
            Ok(parts.join("\n\n"))
        }
        _ => Err(bad(path, "must be a string or an array of text blocks")),
    }
}

/// The messages as OpenAI messages: a `system` message joins the instructions; a user
/// message's `tool_result` blocks become `tool`
/// messages (an error result marked as one), its text one user message after them; an
/// assistant message's `tool_use` blocks become `tool_calls`, its thinking the
/// `reasoning_content` (its text too, before calls, when it has no thinking).
fn read_messages(
    list: Vec<Value>,
    out: &mut Vec<Value>,
    origin: &mut Vec<String>,
) -> Result<(), ServeError> {
    if list.is_empty() {
        return Err(bad("messages", "must be a non-empty array"));
    }
    let last = list.len() - 1;
    // Tool-use ids so far, to the tool's name.
    let mut ids: HashMap<String, String> = HashMap::new();
    for (i, m) in list.into_iter().enumerate() {
        let path = format!("messages.{i}");
        let m: Message = typed(m, &path)?;
        let blocks = match m.content {
            Value::String(s) => vec![Block::Text { text: s }],
            Value::Array(list) => {
                let mut blocks = Vec::with_capacity(list.len());
                for (j, b) in list.into_iter().enumerate() {
                    blocks.push(typed::<Block>(b, &format!("{path}.content.{j}"))?);
                }
                blocks
            }
            _ => {
                return Err(bad(
                    &format!("{path}.content"),
                    "must be a string or blocks",
                ));
            }
        };
        match m.role {
            Speaker::System => {
                let mut texts = Vec::new();
                for (j, block) in blocks.into_iter().enumerate() {
                    match block {
                        Block::Text { text } => texts.push(text),
                        _ => {
                            return Err(bad(
                                &format!("{path}.content.{j}"),
                                "a system message holds text blocks",
                            ));
                        }
                    }
                }
                out.push(json!({"role": "system", "content": texts.join("\n\n")}));
                origin.push(path);
            }
            Speaker::User => {
                let mut texts = Vec::new();
                for (j, block) in blocks.into_iter().enumerate() {
                    let p = format!("{path}.content.{j}");
                    match block {
                        Block::Text { text } => texts.push(text),
                        Block::ToolResult {
                            tool_use_id,
                            content,
                            is_error,
                        } => {
                            if !ids.contains_key(&tool_use_id) {
                                return Err(bad(
                                    &format!("{p}.tool_use_id"),
                                    format!("`{tool_use_id}` matches no earlier tool_use block"),
                                ));
                            }
                            let mut text = text_of(content.unwrap_or(Value::Null), &p)?;
                            if is_error {
                                text = format!("Error: {text}");
                            }
                            out.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": text}));
                            origin.push(p);
                        }
                        _ => {
                            return Err(bad(
                                &p,
                                "a user message holds text and tool_result blocks",
                            ));
                        }
                    }
                }
                let text = texts.join("\n\n");
                if !text.trim().is_empty() || out.last().is_none_or(|l| l["role"] != "tool") {
                    out.push(json!({"role": "user", "content": text}));
                    origin.push(path);
                }
            }
            Speaker::Assistant => {
                if i == last {
                    return Err(bad(
                        &path,
                        "the last message must be the user's (a prefilled assistant message is not supported)",
                    ));
                }
                let (mut thinking, mut texts, mut calls) = (Vec::new(), Vec::new(), Vec::new());
                for (j, block) in blocks.into_iter().enumerate() {
                    match block {
                        Block::Text { text } => texts.push(text),
                        Block::Thinking { thinking: t } => thinking.push(t),
                        Block::RedactedThinking {} => {}
                        Block::ToolUse { id, name, input } => {
                            ids.insert(id.clone(), name.clone());
                            calls.push(json!({"id": id, "type": "function",
                                "function": {"name": name, "arguments": input}}));
                        }
                        Block::ToolResult { .. } => {
                            return Err(bad(
                                &format!("{path}.content.{j}"),
                                "a tool_result block belongs in a user message",
                            ));
                        }
                    }
                }
                let text = texts.join("\n\n");
                let mut reasoning = thinking.join("\n\n");
                let mut message = json!({"role": "assistant"});
                if calls.is_empty() {
                    message["content"] = json!(text);
                } else {
                    if reasoning.trim().is_empty() {
                        reasoning = text;
                    }
                    message["tool_calls"] = json!(calls);
                }
                if !reasoning.trim().is_empty() {
                    message["reasoning_content"] = json!(reasoning);
                }
                out.push(message);
                origin.push(path);
            }
        }
    }
    Ok(())
}

/// A refusal of the shared reading, its field named as Anthropic names it.
fn rename(e: ServeError, origin: &[String]) -> ServeError {
    let ServeError::BadRequest {
        message,
        param: Some(param),
    } = e
    else {
        return e;
    };
    let path = if let Some(rest) = param.strip_prefix("messages[") {
        let (index, tail) = rest.split_once(']').unwrap_or((rest, ""));
        let base = index
            .parse::<usize>()
            .ok()
            .and_then(|i| origin.get(i).cloned())
            .unwrap_or_else(|| "messages".into());
        let tail = tail.trim_start_matches('.');
        if tail.is_empty() || tail == "content" {
            base
        } else {
            format!("{base}.{tail}")
        }
    } else {
        param
            .replace("function.parameters", "input_schema")
            .replace("function.name", "name")
            .replace('[', ".")
            .replace(']', "")
    };
    bad(&path, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: Value) -> String {
        match read(&body, true) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted: {body}"),
        }
    }

    #[test]
    fn refusals_name_the_field_as_anthropic_does() {
        let user = json!([{"role": "user", "content": "hi"}]);
        assert!(err(json!({"messages": user})).starts_with("max_tokens:"));
        let schema_bad = json!({"max_tokens": 5, "messages": user,
            "tools": [{"name": "t", "input_schema": {"type": "string"}}]});
        assert!(err(schema_bad).starts_with("tools.0.input_schema:"));
        let orphan = json!({"max_tokens": 5, "messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_x", "content": "1"}]}]});
        assert!(err(orphan).starts_with("messages.0.content.0.tool_use_id:"));
        let image = json!({"max_tokens": 5, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {}}]}]});
        assert!(err(image).starts_with("messages.0.content.0:"));
    }

    #[test]
    fn a_system_message_in_the_conversation_joins_the_instructions() {
        let body = json!({"max_tokens": 5, "system": "First.", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "system", "content": [{"type": "text", "text": "Second."}]}]});
        let parsed = read(&body, true).unwrap();
        assert_eq!(parsed.ask.instructions, "First.\n\nSecond.");
    }
}
