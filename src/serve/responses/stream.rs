//! A streamed answer in the Responses API's shape: named server-sent events, each with its
//! `type` and a `sequence_number` counting from 0.
//!
//! 1. `response.created`, then `response.in_progress`, with the response (`in_progress`, no
//!    output yet);
//! 2. each output item's events as `output.rs` makes them, in the order the core emits its
//!    events (a turn the core corrects never reaches them: the core emits only what it keeps);
//! 3. `response.completed` (or `response.incomplete` when `max_output_tokens` cut it) with the
//!    whole response, kept in the store first when the request asked for `store`.
//!
//! When the events end without an end (the core failed mid-way), what was open is closed,
//! then `response.failed` (the response with `status: failed` and its `error`) and an `error`
//! event (`{"type": "error", "error": {…}}`), which the SDKs raise. A comment line goes out
//! every 15 s while nothing is ready.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};

use super::output::Output;
use super::render::{ResponsesRender, Saver};
use super::request::Echo;
use super::resource::{About, Status, resource};
use crate::serve::ServeEvent;
use crate::serve::response::AnswerMeta;

/// How often a comment goes out while no event is ready.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The message of a response the core broke off.
pub(crate) const BROKEN_OFF: &str = "the answer could not be completed; the stream was broken off";

struct State {
    events: BoxStream<'static, ServeEvent>,
    output: Output,
    meta: AnswerMeta,
    echo: Echo,
    warnings: Vec<String>,
    saver: Option<Arc<Saver>>,
    queue: VecDeque<Value>,
    sequence: u64,
    finished: bool,
}

impl State {
    fn about(&self) -> About<'_> {
        About {
            meta: &self.meta,
            echo: &self.echo,
            warnings: &self.warnings,
        }
    }

    /// The next SSE event of the queue, numbered.
    fn send(&mut self, mut data: Value) -> Result<Event, axum::Error> {
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        let name = data["type"].as_str().unwrap_or("message").to_string();
        Event::default().event(name).json_data(data)
    }

    /// Queue the events of the next core event (`None`: the events ended).
    async fn take(&mut self, next: Option<ServeEvent>) {
        let mut out = Vec::new();
        let Some(event) = next else {
            tracing::warn!(
                "the answer's events ended without Done; the stream ends with response.failed"
            );
            self.output.finish(&mut out);
            let failed = resource(
                &self.about(),
                self.output.items(),
                Status::Failed,
                None,
                Some(BROKEN_OFF),
            );
            out.push(json!({"type": "response.failed", "response": failed}));
            out.push(json!({"type": "error", "error": {"type": "server_error",
                "code": "server_error", "message": BROKEN_OFF, "param": null}}));
            self.queue.extend(out);
            self.finished = true;
            return;
        };
        let done = matches!(event, ServeEvent::Done { .. });
        self.output.take(event, &mut out);
        self.queue.extend(out);
        if done {
            let end = self.output.end();
            let status = Status::of(end);
            let whole = resource(&self.about(), self.output.items(), status, end, None);
            if let Some(saver) = &self.saver {
                saver.save(&whole).await;
            }
            let name = match status {
                Status::Incomplete => "response.incomplete",
                _ => "response.completed",
            };
            self.queue
                .push_back(json!({"type": name, "response": whole}));
            self.finished = true;
        }
    }
}

/// The streamed answer made of `events`.
pub(crate) fn sse(
    render: &ResponsesRender,
    meta: AnswerMeta,
    events: BoxStream<'static, ServeEvent>,
) -> Response {
    let mut state = State {
        events,
        output: Output::new(render.names.clone()),
        meta,
        echo: render.echo.clone(),
        warnings: render.warnings.clone(),
        saver: render.saver.clone(),
        queue: VecDeque::new(),
        sequence: 0,
        finished: false,
    };
    let started = resource(&state.about(), &[], Status::InProgress, None, None);
    state
        .queue
        .push_back(json!({"type": "response.created", "response": started}));
    state
        .queue
        .push_back(json!({"type": "response.in_progress", "response": started}));
    let stream = futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(data) = state.queue.pop_front() {
                let event = state.send(data);
                return Some((event, state));
            }
            if state.finished {
                return None;
            }
            let next = state.events.next().await;
            state.take(next).await;
        }
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The events of a stream of `events`, as (name, data).
    async fn events_of(events: Vec<ServeEvent>) -> Vec<(String, Value)> {
        let render = ResponsesRender {
            echo: Echo::default(),
            names: Default::default(),
            warnings: Vec::new(),
            saver: None,
        };
        let meta = AnswerMeta {
            id: "resp_1".into(),
            model: "m".into(),
            created: 0,
        };
        let response = sse(&render, meta, futures::stream::iter(events).boxed());
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        String::from_utf8(body.to_vec())
            .unwrap()
            .split("\n\n")
            .filter(|e| !e.trim().is_empty())
            .map(|e| {
                let name = e.lines().find_map(|l| l.strip_prefix("event: ")).unwrap();
                let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
                (name.to_string(), serde_json::from_str(data).unwrap())
            })
            .collect()
    }

    #[tokio::test]
    async fn events_that_end_without_done_end_in_response_failed_then_error() {
        let events = events_of(vec![ServeEvent::Content("partial".into())]).await;
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        let tail = &names[names.len() - 5..];
        assert_eq!(
            tail,
            [
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.failed",
                "error"
            ]
        );
        let failed = &events[events.len() - 2].1["response"];
        assert_eq!(failed["status"], "failed");
        assert_eq!(failed["error"]["code"], "server_error");
        assert_eq!(failed["output"][0]["content"][0]["text"], "partial");
        let error = &events[events.len() - 1].1;
        assert_eq!(error["error"]["message"], BROKEN_OFF);
        assert!(!names.contains(&"response.completed"));
    }
}
