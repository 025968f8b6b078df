//! The whole answer: Anthropic's `message` object, collected from the block operations of
//! `blocks.rs`; and this face's [`Render`] (whole or streamed).

use std::sync::Arc;

use axum::response::Response;
use futures::stream::BoxStream;
use serde_json::{Value, json};

use super::blocks::{Blocks, Delta, Op};
use super::stream::sse;
use crate::serve::ServeEvent;
use crate::serve::face::Render;
use crate::serve::response::AnswerMeta;

/// How this face renders one request's answer.
pub(crate) struct MessagesRender {
    /// Thoughts go out as `thinking` blocks.
    pub thinking: bool,
    /// The client's stop sequences.
    pub stops: Vec<String>,
}

impl MessagesRender {
    pub(crate) fn blocks(&self) -> Blocks {
        Blocks::new(self.thinking, self.stops.clone())
    }
}

impl Render for MessagesRender {
    fn id_prefix(&self) -> &'static str {
        "msg_"
    }

    fn whole(&self, meta: &AnswerMeta, events: &[ServeEvent]) -> Value {
        let mut blocks = self.blocks();
        let mut ops = Vec::new();
        for e in events {
            blocks.take(e.clone(), &mut ops);
        }
        message(meta, &ops)
    }

    fn stream(&self, meta: AnswerMeta, events: BoxStream<'static, ServeEvent>) -> Response {
        sse(meta, self.blocks(), events)
    }
}

/// An answer's `message` object: `content` built from `ops`; the stop reason and usage from its
/// end (an answer with none yet has `stop_reason: null` and no usage, as `message_start` sends).
pub(crate) fn message(meta: &AnswerMeta, ops: &[Op]) -> Value {
    let mut content: Vec<Value> = Vec::new();
    // A tool_use block's input, as its JSON deltas arrive.
    let mut inputs: Vec<(usize, String)> = Vec::new();
    let mut end = (
        Value::Null,
        Value::Null,
        json!({"input_tokens": 0, "output_tokens": 0}),
    );
    for op in ops {
        match op {
            Op::Start(_, start) => content.push(json!(start)),
            Op::Delta(_, delta) => {
                let Some(last) = content.last_mut() else {
                    continue;
                };
                let (field, more) = match delta {
                    Delta::Text { text } => ("text", text),
                    Delta::Thinking { thinking } => ("thinking", thinking),
                    Delta::InputJson { partial_json } => {
                        match inputs.last_mut() {
                            Some((at, json)) if *at == content.len() - 1 => {
                                json.push_str(partial_json)
                            }
                            _ => inputs.push((content.len() - 1, partial_json.clone())),
                        }
                        continue;
                    }
                };
                let text = format!("{}{more}", last[field].as_str().unwrap_or_default());
                last[field] = Value::String(text);
            }
            Op::Stop(_) => {}
            Op::End {
                stop_reason,
                stop_sequence,
                usage,
            } => {
                end = (
                    json!(stop_reason),
                    json!(stop_sequence),
                    json!({"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens}),
                );
            }
        }
    }
    for (at, text) in inputs {
        // The core's arguments are a validated object's text; anything else is kept as empty.
        if let (Some(block), Ok(Value::Object(input))) =
            (content.get_mut(at), serde_json::from_str::<Value>(&text))
        {
            block["input"] = Value::Object(input);
        }
    }
    json!({
        "id": meta.id,
        "type": "message",
        "role": "assistant",
        "model": meta.model,
        "content": content,
        "stop_reason": end.0,
        "stop_sequence": end.1,
        "usage": end.2,
    })
}

/// The renderer for a parsed request.
pub(crate) fn render_for(thinking: bool, stops: Vec<String>) -> Arc<dyn Render> {
    Arc::new(MessagesRender { thinking, stops })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Usage;
    use crate::serve::{FinishReason, ToolCallOut};

    fn meta() -> AnswerMeta {
        AnswerMeta {
            id: "msg_1".into(),
            model: "m".into(),
            created: 0,
        }
    }

    #[test]
    fn a_call_with_a_thought_is_thinking_then_tool_use() {
        let events = vec![
            ServeEvent::Reasoning("I look.".into()),
            ServeEvent::ToolCall(ToolCallOut {
                index: 0,
                id: "call_abc".into(),
                name: "weather".into(),
                arguments: r#"{"city":"Paris"}"#.into(),
            }),
            ServeEvent::Done {
                finish_reason: FinishReason::ToolCalls,
                usage: Usage {
                    prompt_tokens: 7,
                    completion_tokens: 3,
                },
            },
        ];
        let with = MessagesRender {
            thinking: true,
            stops: vec![],
        };
        let v = with.whole(&meta(), &events);
        assert_eq!(
            v["content"],
            json!([
                {"type": "thinking", "thinking": "I look.", "signature": ""},
                {"type": "tool_use", "id": "toolu_abc", "name": "weather", "input": {"city": "Paris"}},
            ])
        );
        assert_eq!(v["stop_reason"], "tool_use");
        assert_eq!(v["usage"], json!({"input_tokens": 7, "output_tokens": 3}));
        let without = MessagesRender {
            thinking: false,
            stops: vec![],
        };
        let v = without.whole(&meta(), &events);
        assert_eq!(v["content"].as_array().map(Vec::len), Some(1));
        assert_eq!(v["content"][0]["type"], "tool_use");
    }
}
