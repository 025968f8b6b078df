//! A Responses conversation (the `input` items, after those of the responses it continues) as
//! OpenAI chat messages, which [`Ask::read`](crate::serve::request::Ask::read) reads into the
//! core's conversation with every check the other faces get.
//!
//! * `message` (user, system, developer, assistant; `input_text` / `output_text` parts, or a
//!   string): a user, system or assistant message;
//! * `reasoning` (its `content`'s `reasoning_text`, else its `summary`): the thought of the
//!   assistant message or calls that follow it;
//! * `function_call` and `custom_tool_call`: the calls of one assistant message, as many as come
//!   in a row (a custom tool's `input` becomes its one argument, `input`);
//! * `function_call_output` and `custom_tool_call_output`: `tool` messages, whose `call_id`
//!   must be an earlier call's; one with no `call_id` but a `name` (and `namespace`), which
//!   answers no call (Codex CLI's goal objective), is a system message `NAME: OUTPUT`.
//!
//! Anything else (an image, a file, an `item_reference`, a built-in tool's call) is refused by
//! its place: `input[3].content[0]`.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::serve::ServeError;

/// The argument a custom (freeform) tool's one string goes in.
pub(crate) const CUSTOM_ARGUMENT: &str = "input";

/// The one name the upstream knows the tool `name` of the namespace `namespace` by: the two
/// joined by `__` (`mcp__docs` and `search` make `mcp__docs__search`, the shape Codex CLI gave
/// its MCP tools before it sent namespaces), once where the namespace already ends in it.
pub(crate) fn flat_name(namespace: &str, name: &str) -> String {
    if namespace.ends_with("__") {
        format!("{namespace}{name}")
    } else {
        format!("{namespace}__{name}")
    }
}

/// The name a call item gives, as the upstream knows it: its `namespace`'s flat name if it has one.
fn call_name(name: String, namespace: Option<String>) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => flat_name(&ns, &name),
        _ => name,
    }
}

fn bad(path: &str, message: impl std::fmt::Display) -> ServeError {
    ServeError::bad_request(format!("{path}: {message}"), path)
}

/// An input item, as far as this face reads it. A message may leave out `type`.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Item {
    Message {
        role: String,
        content: Value,
    },
    Reasoning {
        #[serde(default)]
        summary: Vec<Part>,
        #[serde(default)]
        content: Option<Vec<Part>>,
    },
    FunctionCall {
        call_id: String,
        name: String,
        #[serde(default)]
        namespace: Option<String>,
        #[serde(default)]
        arguments: Option<Value>,
    },
    CustomToolCall {
        call_id: String,
        name: String,
        #[serde(default)]
        namespace: Option<String>,
        #[serde(default)]
        input: String,
    },
    FunctionCallOutput {
        #[serde(default)]
        call_id: Option<String>,
        output: Value,
        #[serde(flatten)]
        note: Note,
    },
    CustomToolCallOutput {
        #[serde(default)]
        call_id: Option<String>,
        output: Value,
        #[serde(flatten)]
        note: Note,
    },
}

/// What names an output that answers no call: Codex CLI sends its goal's objective as a
/// `function_call_output` with a `name` and a `namespace` (`agent`) and no `call_id`.
#[derive(Deserialize)]
struct Note {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
}

/// A content part: text of some kind, or something this face cannot read.
#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

/// The assistant's turn being gathered: its thought, its text, its calls.
#[derive(Default)]
struct Assistant {
    reasoning: Vec<String>,
    text: Vec<String>,
    calls: Vec<Value>,
    /// The input item it began at, for a refusal.
    origin: Option<String>,
}

/// The chat messages of a conversation, and for each the input item it came from (to name an
/// item in a refusal of the shared reading).
pub(crate) struct Messages {
    pub messages: Vec<Value>,
    pub origin: Vec<String>,
}

impl Messages {
    fn push(&mut self, message: Value, origin: String) {
        self.messages.push(message);
        self.origin.push(origin);
    }

    /// The assistant's turn gathered so far, as one message.
    fn flush(&mut self, turn: &mut Assistant) {
        let turn = std::mem::take(turn);
        let Some(origin) = turn.origin else {
            return;
        };
        let text = turn.text.join("\n\n");
        let mut reasoning = turn.reasoning.join("\n\n");
        let mut message = json!({"role": "assistant"});
        if turn.calls.is_empty() {
            message["content"] = json!(text);
        } else {
            // The text said before the calls is their thought when there is no other.
            if reasoning.trim().is_empty() {
                reasoning = text;
            }
            message["tool_calls"] = Value::Array(turn.calls);
        }
        if !reasoning.trim().is_empty() {
            message["reasoning_content"] = json!(reasoning);
        }
        self.push(message, origin);
    }
}

/// The conversation's `items` (the input of the responses continued, their output, then this
/// request's input; `first` is the index of this request's first item, so that refusals name
/// `input[i]` for those and `previous_response_id` for the others) after `instructions`.
pub(crate) fn to_messages(
    instructions: Option<&str>,
    items: Vec<Value>,
    first: usize,
) -> Result<Messages, ServeError> {
    let mut out = Messages {
        messages: Vec::with_capacity(items.len() + 1),
        origin: Vec::with_capacity(items.len() + 1),
    };
    if let Some(text) = instructions.filter(|t| !t.trim().is_empty()) {
        out.push(
            json!({"role": "system", "content": text}),
            "instructions".into(),
        );
    }
    let mut turn = Assistant::default();
    for (i, mut item) in items.into_iter().enumerate() {
        let path = match i.checked_sub(first) {
            Some(j) => format!("input[{j}]"),
            None => "previous_response_id".into(),
        };
        if let Some(o) = item.as_object_mut()
            && !o.contains_key("type")
            && o.contains_key("role")
        {
            o.insert("type".into(), json!("message"));
        }
        let item: Item = serde_json::from_value(item).map_err(|e| bad(&path, e))?;
        match item {
            Item::Message { role, content } => {
                let text = text_of(content, &format!("{path}.content"))?;
                match role.as_str() {
                    "assistant" => {
                        if !turn.calls.is_empty() {
                            out.flush(&mut turn);
                        }
                        turn.origin.get_or_insert(path);
                        turn.text.push(text);
                    }
                    "user" | "system" | "developer" => {
                        out.flush(&mut turn);
                        let role = if role == "user" { "user" } else { "system" };
                        out.push(json!({"role": role, "content": text}), path);
                    }
                    other => {
                        return Err(bad(
                            &format!("{path}.role"),
                            format!("unknown role `{other}`"),
                        ));
                    }
                }
            }
            Item::Reasoning { summary, content } => {
                if !turn.calls.is_empty() || !turn.text.is_empty() {
                    out.flush(&mut turn);
                }
                let parts = content.filter(|c| !c.is_empty()).unwrap_or(summary);
                let text: Vec<String> = parts.into_iter().filter_map(|p| p.text).collect();
                turn.origin.get_or_insert(path);
                turn.reasoning.push(text.join("\n\n"));
            }
            Item::FunctionCall {
                call_id,
                name,
                namespace,
                arguments,
            } => {
                let name = call_name(name, namespace);
                turn.origin.get_or_insert(path);
                let arguments = match arguments {
                    Some(Value::String(s)) => s,
                    Some(Value::Null) | None => "{}".into(),
                    Some(other) => other.to_string(),
                };
                turn.calls.push(json!({"id": call_id, "type": "function",
                    "function": {"name": name, "arguments": arguments}}));
            }
            Item::CustomToolCall {
                call_id,
                name,
                namespace,
                input,
            } => {
                let name = call_name(name, namespace);
                turn.origin.get_or_insert(path);
                let arguments = json!({ CUSTOM_ARGUMENT: input }).to_string();
                turn.calls.push(json!({"id": call_id, "type": "function",
                    "function": {"name": name, "arguments": arguments}}));
            }
            Item::FunctionCallOutput {
                call_id,
                output,
                note,
            }
            | Item::CustomToolCallOutput {
                call_id,
                output,
                note,
            } => {
                let text = text_of(output, &format!("{path}.output"))?;
                match (call_id, note.name) {
                    (Some(call_id), _) => {
                        out.flush(&mut turn);
                        out.push(
                            json!({"role": "tool", "tool_call_id": call_id, "content": text}),
                            path,
                        );
                    }
                    // An output that answers no call is what the client tells the model, as its
                    // system messages are: among the instructions, under its name.
                    (None, Some(name)) => {
                        let name = call_name(name, note.namespace);
                        out.push(
                            json!({"role": "system", "content": format!("{name}: {text}")}),
                            path,
                        );
                    }
                    (None, None) => {
                        return Err(bad(
                            &format!("{path}.call_id"),
                            "an output needs the call_id of its call, or a name",
                        ));
                    }
                }
            }
        }
    }
    out.flush(&mut turn);
    Ok(out)
}

/// The text of a message's `content` or a call's `output`: a string, or text parts joined.
fn text_of(value: Value, path: &str) -> Result<String, ServeError> {
    match value {
        Value::String(s) => Ok(s),
        Value::Null => Ok(String::new()),
        Value::Array(parts) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (j, part) in parts.into_iter().enumerate() {
                let p = format!("{path}[{j}]");
                let part: Part = serde_json::from_value(part).map_err(|e| bad(&p, e))?;
                match (part.kind.as_str(), part.text) {
                    (
                        "input_text" | "output_text" | "text" | "summary_text" | "reasoning_text",
                        Some(t),
                    ) => texts.push(t),
                    ("refusal", _) => {}
                    (kind, _) => {
                        return Err(bad(
                            &p,
                            format!("`{kind}` content is not supported (text parts only)"),
                        ));
                    }
                }
            }
            Ok(texts.join(""))
        }
        _ => Err(bad(path, "must be a string or an array of content parts")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_in_a_row_are_one_assistant_message_with_their_thought() {
        let items = vec![
            json!({"role": "user", "content": "Weather in Paris and Rome?"}),
            json!({"type": "reasoning", "id": "rs_1", "summary": [],
                   "content": [{"type": "reasoning_text", "text": "Two cities."}]}),
            json!({"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{\"city\":\"Paris\"}"}),
            json!({"type": "custom_tool_call", "call_id": "c2", "name": "patch", "input": "*** x"}),
            json!({"type": "function_call_output", "call_id": "c1", "output": "sunny"}),
            json!({"type": "custom_tool_call_output", "call_id": "c2",
                   "output": [{"type": "input_text", "text": "done"}]}),
        ];
        let m = to_messages(Some("Be brief."), items, 0).unwrap();
        assert_eq!(m.messages.len(), 5);
        assert_eq!(
            m.messages[0],
            json!({"role": "system", "content": "Be brief."})
        );
        let calls = &m.messages[2];
        assert_eq!(calls["reasoning_content"], "Two cities.");
        assert_eq!(
            calls["tool_calls"][1]["function"]["arguments"],
            r#"{"input":"*** x"}"#
        );
        assert_eq!(m.messages[4]["content"], "done");
        assert_eq!(m.origin[2], "input[1]");
    }

    #[test]
    fn an_image_is_refused_by_its_place() {
        let items = vec![json!({"role": "user", "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": "data:"}]})];
        let e = to_messages(None, items, 0).err().unwrap();
        assert!(e.to_string().starts_with("input[0].content[1]:"), "{e}");
        let reference = vec![json!({"type": "item_reference", "id": "x"})];
        let e = to_messages(None, reference, 0).err().unwrap();
        assert!(e.to_string().starts_with("input[0]:"), "{e}");
    }

    #[test]
    fn an_output_of_no_call_is_a_system_message_and_a_namespaced_call_its_flat_name() {
        // As Codex CLI sends them: a namespace's call, and its goal's objective after a call.
        let items = vec![
            json!({"role": "user", "content": "Read notes.txt."}),
            json!({"type": "function_call", "call_id": "c1", "name": "search",
                   "namespace": "mcp__docs", "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": "c1", "output": "found"}),
            json!({"type": "function_call_output", "name": "goal_objective", "namespace": "agent",
                   "output": "read notes.txt line 2"}),
        ];
        let m = to_messages(None, items, 0).unwrap();
        assert_eq!(
            m.messages[1]["tool_calls"][0]["function"]["name"],
            "mcp__docs__search"
        );
        assert_eq!(
            m.messages[3],
            json!({"role": "system",
            "content": "agent__goal_objective: read notes.txt line 2"})
        );
        let nameless = vec![json!({"type": "function_call_output", "output": "x"})];
        let Err(e) = to_messages(None, nameless, 0) else {
            panic!("an output of no call and no name was read");
        };
        assert!(e.to_string().contains("input[0].call_id"), "{e}");
    }
}
