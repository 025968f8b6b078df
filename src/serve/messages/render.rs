//! This face's [`Render`]: the whole answer as Anthropic's `message` object (`message.rs`), or
//! streamed as its events (`stream.rs`).

use std::sync::Arc;

use axum::response::Response;
use futures::stream::BoxStream;
use serde_json::Value;

use super::blocks::Blocks;
use super::message::message;
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

/// The renderer for a parsed request.
pub(crate) fn render_for(thinking: bool, stops: Vec<String>) -> Arc<dyn Render> {
    Arc::new(MessagesRender { thinking, stops })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Usage;
    use crate::serve::{FinishReason, ToolCallOut};
    use serde_json::json;

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
