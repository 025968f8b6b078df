//! The core's events as Anthropic's content blocks: one sequence of block operations (a block
//! starts, grows, stops; the message ends) that the whole answer collects (`render.rs`) and
//! the stream sends as they come (`stream.rs`), so both are the same answer.
//!
//! * the thought is a `thinking` block when the client asked for thinking, else dropped;
//! * the answer's text is a `text` block, cut at the client's first stop sequence;
//! * each tool call is a `tool_use` block with a fresh `toolu_…` id and its input, sent whole
//!   as one `input_json_delta` (the core emits a call only once it validated);
//! * the end says why (`end_turn`, `tool_use`, `max_tokens`, `stop_sequence`) and the usage
//!   summed over every upstream request.

use serde::Serialize;
use serde_json::Value;

use super::stops::StopCut;
use crate::llm::Usage;
use crate::serve::{FinishReason, ServeEvent};

/// A block as it starts.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Start {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

/// What a block grows by.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "type")]
pub(crate) enum Delta {
    #[serde(rename = "text_delta")]
    Text { text: String },
    #[serde(rename = "thinking_delta")]
    Thinking { thinking: String },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: String },
}

/// Anthropic's `stop_reason`.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
}

/// One step of the answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    Start(u32, Start),
    Delta(u32, Delta),
    Stop(u32),
    End {
        stop_reason: StopReason,
        stop_sequence: Option<String>,
        usage: Usage,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
}

/// Turns one answer's events into block operations.
pub(crate) struct Blocks {
    thinking: bool,
    cut: StopCut,
    open: Option<(u32, Open)>,
    next: u32,
}

impl Blocks {
    /// `thinking`: whether thoughts go out; `stops`: the client's stop sequences.
    pub(crate) fn new(thinking: bool, stops: Vec<String>) -> Blocks {
        Blocks {
            thinking,
            cut: StopCut::new(stops),
            open: None,
            next: 0,
        }
    }

    /// The operations for the next event.
    pub(crate) fn take(&mut self, event: ServeEvent, out: &mut Vec<Op>) {
        match event {
            ServeEvent::Reasoning(text) if self.thinking && !text.is_empty() => {
                let index = self.ensure(Open::Thinking, out);
                out.push(Op::Delta(index, Delta::Thinking { thinking: text }));
            }
            ServeEvent::Reasoning(_) => {}
            ServeEvent::Content(text) => {
                let text = self.cut.push(&text);
                self.text(text, out);
            }
            ServeEvent::ToolCall(call) => {
                self.close(out);
                let index = self.index();
                let id = format!("toolu_{}", call.id.trim_start_matches("call_"));
                let start = Start::ToolUse {
                    id,
                    name: call.name,
                    input: Value::Object(Default::default()),
                };
                out.push(Op::Start(index, start));
                let delta = Delta::InputJson {
                    partial_json: call.arguments,
                };
                out.push(Op::Delta(index, delta));
                out.push(Op::Stop(index));
            }
            ServeEvent::Done {
                finish_reason,
                usage,
            } => {
                let rest = self.cut.finish();
                self.text(rest, out);
                self.close(out);
                let stop_sequence = self.cut.hit().map(str::to_owned);
                let stop_reason = match (&stop_sequence, finish_reason) {
                    (Some(_), _) => StopReason::StopSequence,
                    (None, FinishReason::ToolCalls) => StopReason::ToolUse,
                    (None, FinishReason::Length) => StopReason::MaxTokens,
                    (None, _) => StopReason::EndTurn,
                };
                out.push(Op::End {
                    stop_reason,
                    stop_sequence,
                    usage,
                });
            }
        }
    }

    fn text(&mut self, text: String, out: &mut Vec<Op>) {
        if !text.is_empty() {
            let index = self.ensure(Open::Text, out);
            out.push(Op::Delta(index, Delta::Text { text }));
        }
    }

    fn index(&mut self) -> u32 {
        self.next += 1;
        self.next - 1
    }

    /// The open block of this kind, started (and the other closed) if need be.
    fn ensure(&mut self, kind: Open, out: &mut Vec<Op>) -> u32 {
        if let Some((index, open)) = self.open
            && open == kind
        {
            return index;
        }
        self.close(out);
        let index = self.index();
        let start = match kind {
            Open::Text => Start::Text {
                text: String::new(),
            },
            Open::Thinking => Start::Thinking {
                thinking: String::new(),
                signature: String::new(),
            },
        };
        out.push(Op::Start(index, start));
        self.open = Some((index, kind));
        index
    }

    fn close(&mut self, out: &mut Vec<Op>) {
        if let Some((index, _)) = self.open.take() {
            out.push(Op::Stop(index));
        }
    }
}
