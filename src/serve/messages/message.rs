//! Anthropic's `message` object, collected from the block operations of `blocks.rs`: the whole
//! answer, and the empty message a stream starts with.

use serde_json::{Value, json};

use super::blocks::{Delta, Op};
use crate::serve::response::AnswerMeta;

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
