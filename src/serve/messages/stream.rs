//! A streamed answer in Anthropic's shape: named server-sent events.
//!
//! 1. `message_start` with the message (no content yet, `stop_reason: null`), then a `ping`;
//! 2. for each block, `content_block_start`, its `content_block_delta`s (`thinking_delta`,
//!    `text_delta`, `input_json_delta`) and `content_block_stop`, as `blocks.rs` makes them;
//! 3. `message_delta` with the `stop_reason`, `stop_sequence` and the usage summed over every
//!    upstream request, then `message_stop`.
//!
//! While nothing is ready a `ping` goes out every 15 s. When the events end without an end (the
//! core failed mid-way), the stream ends with an `error` event in Anthropic's error shape
//! (`api_error`), which the SDKs raise.

use std::collections::VecDeque;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};

use super::blocks::{Blocks, Op};
use super::message::message;
use crate::serve::ServeEvent;
use crate::serve::response::AnswerMeta;

/// How often a `ping` goes out while no event is ready.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The message of the error event that ends a stream the core broke off.
const BROKEN_OFF: &str = "the answer could not be completed; the stream was broken off";

struct State {
    events: BoxStream<'static, ServeEvent>,
    blocks: Blocks,
    queue: VecDeque<Result<Event, axum::Error>>,
    finished: bool,
}

fn event(name: &str, data: Value) -> Result<Event, axum::Error> {
    Event::default().event(name).json_data(data)
}

/// The streamed answer made of `events`.
pub(crate) fn sse(
    meta: AnswerMeta,
    blocks: Blocks,
    events: BoxStream<'static, ServeEvent>,
) -> Response {
    let mut queue = VecDeque::new();
    let start = message(&meta, &[]);
    queue.push_back(event(
        "message_start",
        json!({"type": "message_start", "message": start}),
    ));
    queue.push_back(event("ping", json!({"type": "ping"})));
    let state = State {
        events,
        blocks,
        queue,
        finished: false,
    };
    let stream = futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(e) = state.queue.pop_front() {
                return Some((e, state));
            }
            if state.finished {
                return None;
            }
            let next = state.events.next().await;
            state.take(next);
        }
    });
    let ping = Event::default().event("ping").data(r#"{"type": "ping"}"#);
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).event(ping))
        .into_response()
}

impl State {
    fn take(&mut self, next: Option<ServeEvent>) {
        let Some(e) = next else {
            tracing::warn!(
                "the answer's events ended without Done; the stream ends with an error event"
            );
            let error =
                json!({"type": "error", "error": {"type": "api_error", "message": BROKEN_OFF}});
            self.queue.push_back(event("error", error));
            self.finished = true;
            return;
        };
        let mut ops = Vec::new();
        self.blocks.take(e, &mut ops);
        for op in ops {
            let e = match op {
                Op::Start(index, block) => event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": block}),
                ),
                Op::Delta(index, delta) => event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": delta}),
                ),
                Op::Stop(index) => event(
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": index}),
                ),
                Op::End {
                    stop_reason,
                    stop_sequence,
                    usage,
                } => {
                    let delta = json!({"type": "message_delta",
                        "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                        "usage": {"input_tokens": usage.prompt_tokens,
                                  "output_tokens": usage.completion_tokens}});
                    self.queue.push_back(event("message_delta", delta));
                    self.finished = true;
                    event("message_stop", json!({"type": "message_stop"}))
                }
            };
            self.queue.push_back(e);
        }
    }
}
