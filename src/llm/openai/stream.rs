//! A streamed turn: the answer (sent by `send.rs`) read as reqwest's byte stream, its
//! server-sent events framed by `eventsource-stream`, each event's chunk read by serde and taken
//! into the turn's state. How the stream ends, read to its end so that the connection goes back
//! to the pool, or dropped to cut the generation short, is `ending.rs`'s.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;

use super::OpenAiModel;
use super::attempt_error::AttemptError;
use super::ending::{Ending, Reading};
use super::state::TurnState;
use super::wire::WireChunk;
use crate::llm::{DeltaSink, LlmError};
use crate::text::clip_bytes;
use crate::upstream::Fault;

/// The largest server-sent event accepted, counted as the bytes read since the last whole
/// event. A chunk is a few hundred bytes; a server that never ends an event is cut off here
/// rather than filling the memory. (`eventsource-stream` scans its whole pending text again at
/// each read, so this also bounds that work.)
const MAX_EVENT: usize = 1 << 20;

/// The largest piece of a read handed to the event parser. `eventsource-stream` moves its
/// pending text forward after every line it takes, so a read of 400 KB holding thousands of
/// small events cost it hundreds of megabytes of copying: quadratic in the read, and all of it
/// without yielding to the runtime (issue 44 item 1: a 2 MB answer of 20,000 deltas stalled
/// `tagloop serve`'s other requests for seconds). Pieces of this size keep the work per line
/// bounded, so reading an answer is linear in its size. (Slicing `Bytes` copies nothing.)
const PARSE_PIECE: usize = 4 * 1024;

impl OpenAiModel {
    /// Read a streamed answer's events into `state` until the end, `[DONE]`, or the state says
    /// the turn is over; then end the stream (`ending.rs`): how it ended.
    pub(super) async fn stream(
        &self,
        response: reqwest::Response,
        state: &mut TurnState,
        on_delta: DeltaSink<'_>,
        sent_stops: Option<&[String]>,
    ) -> Result<Ending, AttemptError> {
        // Bytes read since the last whole event: the parser's pending text is at most this
        // (plus the rest of the read that ended that event).
        let pending = Arc::new(AtomicUsize::new(0));
        let counted = pending.clone();
        // Bytes read in all, for the bound on what is read after the turn is over.
        let total = Arc::new(AtomicUsize::new(0));
        let read_in_all = total.clone();
        let bytes = response
            .bytes_stream()
            .map(move |read| {
                let read = read.map_err(Fault::Io)?;
                read_in_all.fetch_add(read.len(), Ordering::Relaxed);
                if counted.fetch_add(read.len(), Ordering::Relaxed) + read.len() > MAX_EVENT {
                    return Err(Fault::TooLarge {
                        what: "one server-sent event",
                        limit: MAX_EVENT,
                    });
                }
                Ok(read)
            })
            .flat_map(|read: Result<Bytes, Fault>| {
                let pieces: Vec<Result<Bytes, Fault>> = match read {
                    Ok(read) => (0..read.len())
                        .step_by(PARSE_PIECE)
                        .map(|at| Ok(read.slice(at..(at + PARSE_PIECE).min(read.len()))))
                        .collect(),
                    Err(e) => vec![Err(e)],
                };
                futures::stream::iter(pieces)
            })
            // The end of the body ends its last event, as a blank line would.
            .chain(futures::stream::once(async {
                Ok(Bytes::from_static(b"\n\n"))
            }));
        let mut events = std::pin::pin!(bytes.eventsource());
        let fail = |err: LlmError, state: &TurnState| AttemptError {
            emitted: state.emitted,
            ..AttemptError::from(err.redacted(&self.redactor))
        };
        while let Some(event) = events.next().await {
            // Events already read come without a wait: each takes a unit of the task's budget,
            // so that a long answer read at once still lets the runtime's other tasks run.
            tokio::task::coop::consume_budget().await;
            pending.store(0, Ordering::Relaxed);
            let event = match event {
                Ok(event) => event,
                Err(EventStreamError::Transport(fault)) => {
                    let mut err = self.fault(fault, state.received);
                    err.emitted = state.emitted;
                    return Err(err);
                }
                Err(e) => {
                    let err = LlmError::Malformed {
                        url: self.base_url.clone(),
                        reason: e.to_string(),
                        snippet: String::new(),
                    };
                    return Err(fail(err, state));
                }
            };
            if event.event == "keepalive" {
                continue;
            }
            if event.data == "[DONE]" {
                let reading = Reading::new(events.as_mut(), &total);
                return Ok(self.end_finished(reading, state).await);
            }
            let chunk = serde_json::from_str::<WireChunk>(&event.data).map_err(|e| {
                let err = LlmError::Malformed {
                    url: self.base_url.clone(),
                    reason: e.to_string(),
                    snippet: clip_bytes(&event.data, 200),
                };
                fail(err, state)
            })?;
            state
                .absorb(chunk, &self.base_url, &mut *on_delta)
                .map_err(|e| fail(e, state))?;
            if state.is_over() {
                let reading = Reading::new(events.as_mut(), &total);
                return Ok(self.end_over(reading, state, sent_stops).await);
            }
        }
        Ok(Ending::Read)
    }
}
