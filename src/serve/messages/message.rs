//! Anthropic's `message` object, collected from the block operations of `blocks.rs`: the whole
//! answer, and the empty message a stream starts with.

use serde_json::{Value, json};

use super::blocks::{Delta, Op};
use crate::serve::response::AnswerMeta;

/// An answer's `message` object: `content` built from `ops`; the stop reason and usage from its
/// end (an answer with none yet has `stop_reason: null` and no usage, as `message_start` sends).
///
/// Linear in the answer's size: each block's text grows in one `String` and is written into its
/// block once, at the end. (Writing it back after every delta copied the text so far each time:
/// 20,000 deltas of 100 bytes took 7.6 s on the runtime thread, every other client waiting.)
pub(crate) fn message(meta: &AnswerMeta, ops: &[Op]) -> Value {
    let mut content: Vec<Value> = Vec::new();
    // A text or thinking block's text (its index, its field), as its deltas arrive.
    let mut texts: Vec<(usize, &'static str, String)> = Vec::new();
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
                let Some(last) = content.last() else {
                    continue;
                };
                let at = content.len() - 1;
                let (field, more) = match delta {
                    Delta::Text { text } => ("text", text),
                    Delta::Thinking { thinking } => ("thinking", thinking),
                    Delta::InputJson { partial_json } => {
                        match inputs.last_mut() {
                            Some((i, json)) if *i == at => json.push_str(partial_json),
                            _ => inputs.push((at, partial_json.clone())),
                        }
                        continue;
                    }
                };
                match texts.last_mut() {
                    Some((i, f, text)) if *i == at && *f == field => text.push_str(more),
                    _ => {
                        // The block's own start text (empty as `blocks.rs` starts them), then more.
                        let mut text = last[field].as_str().unwrap_or_default().to_owned();
                        text.push_str(more);
                        texts.push((at, field, text));
                    }
                }
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
    for (at, field, text) in texts {
        if let Some(block) = content.get_mut(at) {
            block[field] = Value::String(text);
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
