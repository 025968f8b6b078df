//! The core's events as the Responses API's output items, and the stream events that build
//! them, in one pass: the whole answer keeps the items (`render.rs`), the stream sends the
//! events as they come (`stream.rs`), so both are the same answer.
//!
//! * the thought is a `reasoning` item (its text one `reasoning_text` part), streamed as
//!   `response.reasoning.delta` / `.done` (the Open Responses names);
//! * the answer's text is a `message` item with one `output_text` part, streamed as
//!   `response.output_text.delta` / `.done`;
//! * each tool call is a `function_call` item (`id` `fc_…`, `call_id` the `call_…` the client
//!   sends back with its output), its arguments whole in one
//!   `response.function_call_arguments.delta`, since the core emits a call only once it
//!   validated; a custom (freeform) tool's call is a `custom_tool_call` with its `input`
//!   string (`response.custom_tool_call_input.delta` / `.done`);
//! * every item opens with `response.output_item.added` and closes with
//!   `response.output_item.done`; a text part with `response.content_part.added` / `.done`.

use serde_json::{Value, json};

use super::items::CUSTOM_ARGUMENT;
use super::tools::CallNames;
use crate::llm::Usage;
use crate::serve::{FinishReason, ServeEvent, ToolCallOut};

/// How the answer ended.
#[derive(Debug, Clone, Copy)]
pub(crate) struct End {
    /// The token limit cut it (`incomplete`, reason `max_output_tokens`).
    pub cut: bool,
    pub usage: Usage,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Reasoning,
    Message,
}

/// The item whose text is still growing.
struct Open {
    kind: Kind,
    index: usize,
    id: String,
    text: String,
}

/// One answer's output items, built from its events.
pub(crate) struct Output {
    names: CallNames,
    items: Vec<Value>,
    open: Option<Open>,
    end: Option<End>,
}

/// A fresh item id with this prefix (`msg_`, `rs_`, `fc_`, `ctc_`).
fn item_id(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::new_v4().simple())
}

impl Output {
    /// `names`: the tools whose calls are not plain function calls.
    pub(crate) fn new(names: CallNames) -> Output {
        Output {
            names,
            items: Vec::new(),
            open: None,
            end: None,
        }
    }

    /// The items finished so far (all of them once the answer ended).
    pub(crate) fn items(&self) -> &[Value] {
        &self.items
    }

    /// How the answer ended, once it did.
    pub(crate) fn end(&self) -> Option<End> {
        self.end
    }

    /// Take the next event; the stream events it makes go to `out` (without their
    /// `sequence_number`, which the stream adds).
    pub(crate) fn take(&mut self, event: ServeEvent, out: &mut Vec<Value>) {
        match event {
            ServeEvent::Reasoning(text) => self.grow(Kind::Reasoning, &text, out),
            ServeEvent::Content(text) => self.grow(Kind::Message, &text, out),
            ServeEvent::ToolCall(call) => {
                self.close(out);
                self.call(call, out);
            }
            ServeEvent::Done {
                finish_reason,
                usage,
            } => {
                self.close(out);
                self.end = Some(End {
                    cut: finish_reason == FinishReason::Length,
                    usage,
                });
            }
        }
    }

    /// Close what is open (an answer broken off keeps what it had).
    pub(crate) fn finish(&mut self, out: &mut Vec<Value>) {
        self.close(out);
    }

    fn grow(&mut self, kind: Kind, text: &str, out: &mut Vec<Value>) {
        if text.is_empty() {
            return;
        }
        if self.open.as_ref().is_none_or(|o| o.kind != kind) {
            self.close(out);
            self.start(kind, out);
        }
        let Some(open) = self.open.as_mut() else {
            return;
        };
        open.text.push_str(text);
        let name = match kind {
            Kind::Reasoning => "response.reasoning.delta",
            Kind::Message => "response.output_text.delta",
        };
        let mut delta = json!({"type": name, "item_id": open.id, "output_index": open.index,
            "content_index": 0, "delta": text});
        if kind == Kind::Message {
            delta["logprobs"] = json!([]);
        }
        out.push(delta);
    }

    fn start(&mut self, kind: Kind, out: &mut Vec<Value>) {
        let index = self.items.len();
        let (id, item, part) = match kind {
            Kind::Reasoning => {
                let id = item_id("rs_");
                let item = json!({"type": "reasoning", "id": id, "summary": [], "content": []});
                (id, item, json!({"type": "reasoning_text", "text": ""}))
            }
            Kind::Message => {
                let id = item_id("msg_");
                let item = json!({"type": "message", "id": id, "status": "in_progress",
                    "role": "assistant", "content": []});
                (id, item, text_part(""))
            }
        };
        out.push(
            json!({"type": "response.output_item.added", "output_index": index, "item": item}),
        );
        out.push(json!({"type": "response.content_part.added", "item_id": id,
            "output_index": index, "content_index": 0, "part": part}));
        self.open = Some(Open {
            kind,
            index,
            id,
            text: String::new(),
        });
    }

    fn close(&mut self, out: &mut Vec<Value>) {
        let Some(Open {
            kind,
            index,
            id,
            text,
        }) = self.open.take()
        else {
            return;
        };
        let (done, part, item) = match kind {
            Kind::Reasoning => {
                let part = json!({"type": "reasoning_text", "text": text});
                let done = json!({"type": "response.reasoning.done", "item_id": id,
                    "output_index": index, "content_index": 0, "text": text});
                let item = json!({"type": "reasoning", "id": id, "summary": [], "content": [part]});
                (done, part, item)
            }
            Kind::Message => {
                let part = text_part(&text);
                let done = json!({"type": "response.output_text.done", "item_id": id,
                    "output_index": index, "content_index": 0, "text": text, "logprobs": []});
                let item = json!({"type": "message", "id": id, "status": "completed",
                    "role": "assistant", "content": [part]});
                (done, part, item)
            }
        };
        out.push(done);
        out.push(json!({"type": "response.content_part.done", "item_id": id,
            "output_index": index, "content_index": 0, "part": part}));
        out.push(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
        self.items.push(item);
    }

    fn call(&mut self, call: ToolCallOut, out: &mut Vec<Value>) {
        let index = self.items.len();
        // A custom tool's call carries its one argument's string as `input`; a function's,
        // its arguments' JSON text as `arguments`.
        let custom = self.names.custom.contains(&call.name);
        let (kind, prefix, field, events) = if custom {
            (
                "custom_tool_call",
                "ctc_",
                "input",
                "response.custom_tool_call_input",
            )
        } else {
            (
                "function_call",
                "fc_",
                "arguments",
                "response.function_call_arguments",
            )
        };
        let value = if custom {
            serde_json::from_str::<Value>(&call.arguments)
                .ok()
                .and_then(|v| v.get(CUSTOM_ARGUMENT)?.as_str().map(str::to_string))
                .unwrap_or_default()
        } else {
            call.arguments
        };
        let id = item_id(prefix);
        let mut item = json!({"type": kind, "id": id, "call_id": call.id, "name": call.name,
            "status": "in_progress", field: ""});
        // A namespace's tool is called by its own name, its namespace beside it.
        if let Some((namespace, name)) = self.names.namespace_of(&call.name) {
            item["name"] = json!(name);
            item["namespace"] = json!(namespace);
        }
        out.push(
            json!({"type": "response.output_item.added", "output_index": index, "item": item}),
        );
        out.push(json!({"type": format!("{events}.delta"), "item_id": id,
            "output_index": index, "delta": value}));
        let mut done = json!({"type": format!("{events}.done"), "item_id": id,
            "output_index": index, field: value});
        if !custom {
            done["name"] = item["name"].clone();
        }
        out.push(done);
        item[field] = json!(value);
        item["status"] = json!("completed");
        out.push(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
        self.items.push(item);
    }
}

/// An `output_text` part.
fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: &str) -> ServeEvent {
        ServeEvent::ToolCall(ToolCallOut {
            index: 0,
            id: "call_1".into(),
            name: name.into(),
            arguments: arguments.into(),
        })
    }

    #[test]
    fn a_thought_then_calls_make_a_reasoning_item_and_call_items() {
        let names = CallNames {
            custom: vec!["patch".into()],
            namespaced: vec![(
                "mcp__docs__search".into(),
                "mcp__docs".into(),
                "search".into(),
            )],
        };
        let mut output = Output::new(names);
        let mut events = Vec::new();
        output.take(ServeEvent::Reasoning("I ".into()), &mut events);
        output.take(ServeEvent::Reasoning("look.".into()), &mut events);
        output.take(call("weather", r#"{"city":"Paris"}"#), &mut events);
        output.take(call("patch", r#"{"input":"*** Begin"}"#), &mut events);
        output.take(call("mcp__docs__search", r#"{"q":"redb"}"#), &mut events);
        let done = ServeEvent::Done {
            finish_reason: FinishReason::ToolCalls,
            usage: Usage::default(),
        };
        output.take(done, &mut events);
        let items = output.items();
        assert_eq!(items.len(), 4);
        assert_eq!(items[0]["content"][0]["text"], "I look.");
        assert_eq!(items[1]["type"], "function_call");
        assert_eq!(items[1]["call_id"], "call_1");
        assert_eq!(items[2]["type"], "custom_tool_call");
        assert_eq!(items[2]["input"], "*** Begin");
        // A namespace's tool goes back by its own name, the namespace beside it (Codex CLI's
        // MCP tools), in the item and in its events.
        assert_eq!(items[3]["name"], "search");
        assert_eq!(items[3]["namespace"], "mcp__docs");
        assert!(items[1].get("namespace").is_none());
        let done = events
            .iter()
            .rev()
            .find(|e| e["type"] == "response.function_call_arguments.done");
        assert_eq!(done.unwrap()["name"], "search");
        let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(
            kinds[..4],
            [
                "response.output_item.added",
                "response.content_part.added",
                "response.reasoning.delta",
                "response.reasoning.delta"
            ]
        );
        assert!(kinds.contains(&"response.function_call_arguments.done"));
        assert!(!output.end().unwrap().cut);
    }
}
