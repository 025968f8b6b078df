//! A streamed answer in OpenAI's shape: the [`ServeEvent`]s the core produces become
//! `chat.completion.chunk` server-sent events, ended by `data: [DONE]`.
//!
//! The sequence a client sees:
//!
//! 1. `delta: {"role": "assistant"}`, at once (clients wait for it before anything else);
//! 2. `reasoning_content` and `content` deltas as the core passes them on;
//! 3. each tool call in **one** chunk, whole: `index`, `id`, `type`, `function.name` and the
//!    complete `function.arguments`. The clients that build calls out of deltas (the OpenAI
//!    SDKs' stream helpers, LangChain's `tool_call_chunks`, Vercel's AI SDK) key each call by
//!    `index` and append the `arguments` strings of deltas with the same index, so one delta
//!    carrying everything is read as a call that arrived in one piece. Distinct calls must have
//!    distinct indexes, which the core's [`ToolCallOut::index`] gives;
//! 4. a chunk with an empty delta and the `finish_reason`;
//! 5. with `stream_options.include_usage`, one more chunk with `choices: []` and the `usage`
//!    (and, as OpenAI does, `"usage": null` on every chunk before it);
//! 6. `data: [DONE]`.
//!
//! When the events end without [`ServeEvent::Done`] (the core failed mid-way), the stream ends
//! as OpenAI ends a failed stream: one event holding only OpenAI's error object
//! (`{"error": {"message", "type": "server_error", …}}`; the OpenAI SDKs raise `APIError` with
//! its message when they read a `data:` event with an `error` key), then `[DONE]` for clients
//! that only watch for that. A client that goes away drops the response, and with it the
//! events stream: the core's work for the answer stops there.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde::Serialize;

use super::error::ErrorBody;
use super::event::{FinishReason, ServeEvent, ToolCallOut};
use crate::llm::Usage;

/// What every chunk of one answer repeats: the answer's id, the model name the client asked
/// for, and when the answer was created (Unix seconds).
#[derive(Debug, Clone)]
pub struct ChunkMeta {
    /// The answer's id (`chatcmpl-…`), the same in every chunk.
    pub id: String,
    /// The model name given back to the client (normally the request's `model`).
    pub model: String,
    /// Unix time in seconds, the same in every chunk.
    pub created: u64,
}

/// How often a comment line (`:`) is sent while no event is ready, so that proxies and clients
/// with idle timeouts keep a slow answer's connection open. SSE readers skip comments.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The message of the error event that ends a stream the core broke off.
const BROKEN_OFF: &str = "the answer could not be completed; the stream was broken off";

/// The streamed answer made of `events`, as an SSE response (`text/event-stream`).
///
/// `include_usage` is the request's `stream_options.include_usage`. The events are read as
/// the client reads the chunks (nothing is buffered ahead) and are dropped after
/// [`ServeEvent::Done`]: anything after it is ignored.
pub fn sse_response(
    meta: ChunkMeta,
    include_usage: bool,
    events: impl Stream<Item = ServeEvent> + Send + 'static,
) -> Response {
    let mut state = State {
        events: Box::pin(events),
        queue: VecDeque::new(),
        meta,
        include_usage,
        finished: false,
    };
    let role = Delta {
        role: Some("assistant"),
        ..Delta::default()
    };
    state.push_choice(role, None);
    let chunks = futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.queue.pop_front() {
                return Some((event, state));
            }
            if state.finished {
                return None;
            }
            let next = state.events.next().await;
            state.take(next);
        }
    });
    Sse::new(chunks)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// The chunks of one answer still to be sent, and where the events are.
struct State {
    events: Pin<Box<dyn Stream<Item = ServeEvent> + Send>>,
    /// Events built but not yet sent (a `Done` makes up to three at once).
    queue: VecDeque<Result<Event, axum::Error>>,
    meta: ChunkMeta,
    include_usage: bool,
    /// `[DONE]` is queued: the events are no longer read.
    finished: bool,
}

impl State {
    /// Queue the chunks for the next event (`None`: the events ended).
    fn take(&mut self, event: Option<ServeEvent>) {
        match event {
            Some(ServeEvent::Reasoning(text)) => self.push_choice(
                Delta {
                    reasoning_content: Some(&text),
                    ..Delta::default()
                },
                None,
            ),
            Some(ServeEvent::Content(text)) => self.push_choice(
                Delta {
                    content: Some(&text),
                    ..Delta::default()
                },
                None,
            ),
            Some(ServeEvent::ToolCall(call)) => self.push_choice(
                Delta {
                    tool_calls: Some([ToolCallDelta::from(&call)]),
                    ..Delta::default()
                },
                None,
            ),
            Some(ServeEvent::Done {
                finish_reason,
                usage,
            }) => {
                self.push_choice(Delta::default(), Some(finish_reason));
                if self.include_usage {
                    self.push_chunk(Vec::new(), Some(Some(UsageOut::from(usage))));
                }
                self.finish();
            }
            None => {
                tracing::warn!(id = %self.meta.id, "the answer's events ended without Done; the stream ends with an error event");
                self.queue.push_back(
                    Event::default().json_data(ErrorBody::new(BROKEN_OFF, "server_error")),
                );
                self.finish();
            }
        }
    }

    /// Queue one chunk with one choice.
    fn push_choice(&mut self, delta: Delta<'_>, finish_reason: Option<FinishReason>) {
        let usage = self.include_usage.then_some(None);
        let choice = Choice {
            index: 0,
            delta,
            logprobs: None,
            finish_reason,
        };
        self.push_chunk(vec![choice], usage);
    }

    fn push_chunk(&mut self, choices: Vec<Choice<'_>>, usage: Option<Option<UsageOut>>) {
        let chunk = Chunk {
            id: &self.meta.id,
            object: "chat.completion.chunk",
            created: self.meta.created,
            model: &self.meta.model,
            choices,
            usage,
        };
        self.queue.push_back(Event::default().json_data(chunk));
    }

    /// Queue `[DONE]` and stop reading the events.
    fn finish(&mut self) {
        self.queue.push_back(Ok(Event::default().data("[DONE]")));
        self.finished = true;
    }
}

/// One `chat.completion.chunk`.
#[derive(Serialize)]
struct Chunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: Vec<Choice<'a>>,
    /// Left out unless usage was asked for; then `null` on every chunk but the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Option<UsageOut>>,
}

#[derive(Serialize)]
struct Choice<'a> {
    index: u32,
    delta: Delta<'a>,
    /// Always `null`: the text protocol gives no per-token log probabilities.
    logprobs: Option<()>,
    /// `null` on every chunk but the one that ends the choice.
    finish_reason: Option<FinishReason>,
}

/// What a chunk adds; fields a chunk does not carry are left out (not `null`).
#[derive(Serialize, Default)]
struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<[ToolCallDelta<'a>; 1]>,
}

/// A whole tool call as one delta.
#[derive(Serialize)]
struct ToolCallDelta<'a> {
    index: u32,
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionDelta<'a>,
}

#[derive(Serialize)]
struct FunctionDelta<'a> {
    name: &'a str,
    arguments: &'a str,
}

impl<'a> From<&'a ToolCallOut> for ToolCallDelta<'a> {
    fn from(call: &'a ToolCallOut) -> Self {
        ToolCallDelta {
            index: call.index,
            id: &call.id,
            kind: "function",
            function: FunctionDelta {
                name: &call.name,
                arguments: &call.arguments,
            },
        }
    }
}

/// OpenAI's `usage` object.
#[derive(Serialize)]
struct UsageOut {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
}

impl From<Usage> for UsageOut {
    fn from(u: Usage) -> Self {
        UsageOut {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.prompt_tokens.saturating_add(u.completion_tokens),
        }
    }
}
