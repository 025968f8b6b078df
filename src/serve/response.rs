//! The whole (non-streamed) answer: OpenAI's `chat.completion` object built from the events
//! of one answer, collected.

use serde_json::{Value, json};

use super::event::{FinishReason, ServeEvent};

/// What identifies an answer (the same for its streamed chunks).
#[derive(Debug, Clone)]
pub(crate) struct AnswerMeta {
    pub id: String,
    pub model: String,
    pub created: u64,
}

/// OpenAI's `chat.completion` object for `events`.
pub(crate) fn completion(meta: &AnswerMeta, events: &[ServeEvent]) -> Value {
    let mut content: Option<String> = None;
    let mut reasoning: Option<String> = None;
    let mut calls = Vec::new();
    let mut finish = FinishReason::Stop;
    let mut usage = json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0});
    for e in events {
        match e {
            ServeEvent::Reasoning(r) => reasoning.get_or_insert_with(String::new).push_str(r),
            ServeEvent::Content(c) => content.get_or_insert_with(String::new).push_str(c),
            ServeEvent::ToolCall(c) => calls.push(json!({
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            })),
            ServeEvent::Done {
                finish_reason,
                usage: u,
            } => {
                finish = *finish_reason;
                usage = json!({
                    "prompt_tokens": u.prompt_tokens,
                    "completion_tokens": u.completion_tokens,
                    "total_tokens": u.prompt_tokens + u.completion_tokens,
                });
            }
        }
    }
    let mut message = json!({"role": "assistant", "content": content});
    if let Some(r) = reasoning {
        message["reasoning_content"] = Value::String(r);
    }
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": meta.id,
        "object": "chat.completion",
        "created": meta.created,
        "model": meta.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    })
}
