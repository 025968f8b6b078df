//! How a streamed answer ends: read to its end, so that its connection goes back to reqwest's
//! pool and the next turn pays no new TCP (and TLS) handshake, or dropped, which closes the
//! connection and is the only way to make a server stop generating.
//!
//! * **The server finished** (`[DONE]` read): only the chunked body's closing chunk is left, and
//!   it is read, waiting at most [`END_WAIT`]. A server that keeps the stream open longer is
//!   remembered, and its streams are dropped at `[DONE]` from then on (nothing is lost but the
//!   connection).
//! * **A stop string was seen on our side** while the stops were sent: a server that keeps the
//!   stop in the text (TGI) ends the answer with its next event, which is read, waiting at most
//!   [`STOP_WAIT`]. A server that goes on past it (it ignores `stop`) is cut there, remembered,
//!   and cut at once at later stops.
//! * **The turn must be cut** (a stop the server was not sent, a repetition, a repeated block,
//!   the turn's byte cap): the stream is dropped at once, and the turn's notices say so
//!   ([`NoticeKind::StreamCut`](crate::llm::NoticeKind::StreamCut)).
//!
//! What is read after the turn is over is bounded in time and in bytes ([`MAX_TAIL`]); only its
//! usage count is kept.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use eventsource_stream::{Event, EventStreamError};
use futures::{Stream, StreamExt};

use super::OpenAiModel;
use super::body::server_stops;
use super::state::TurnState;
use crate::upstream::Fault;

/// The longest wait for the end of an answer whose `[DONE]` was read.
const END_WAIT: Duration = Duration::from_secs(1);

/// The longest wait for the end of an answer after a stop the server was sent was seen.
const STOP_WAIT: Duration = Duration::from_millis(250);

/// The most bytes read after the turn is over, waiting for the answer's end.
const MAX_TAIL: usize = 64 << 10;

/// Turns given to the runtime's other tasks after an answer's end (see [`Reading::read_to_end`]).
const POOL_YIELDS: usize = 4;

/// How a streamed answer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// The server had finished: nothing was cut (the connection is kept where the server
    /// allows).
    Read,
    /// The stream was dropped while the server was still generating: why (for the notice).
    Cut(&'static str),
}

/// The rest of a streamed answer, after the turn is over.
pub(super) struct Reading<'a, S> {
    events: Pin<&'a mut S>,
    /// Bytes read from the body so far (the stream's counter).
    total: &'a AtomicUsize,
}

impl<'a, S> Reading<'a, S>
where
    S: Stream<Item = Result<Event, EventStreamError<Fault>>>,
{
    pub(super) fn new(events: Pin<&'a mut S>, total: &'a AtomicUsize) -> Self {
        Reading { events, total }
    }

    /// Read the rest of the body within `wait` and [`MAX_TAIL`] bytes, taking only the usage
    /// count into `state`: whether the body's end was reached.
    async fn read_to_end(mut self, wait: Duration, state: &mut TurnState) -> bool {
        let start = self.total.load(Ordering::Relaxed);
        let read = async {
            while let Some(event) = self.events.next().await {
                let Ok(event) = event else { return false };
                if self.total.load(Ordering::Relaxed) - start > MAX_TAIL {
                    return false;
                }
                state.take_usage(&event.data);
            }
            true
        };
        let ended = tokio::time::timeout(wait, read).await.unwrap_or(false);
        if ended {
            // The body's end is seen here before reqwest's pool has its connection back: that
            // is done by the connection's own tasks, woken by the same end. Let them run first,
            // or the next request, sent at once, would not find the connection idle and would
            // open another one.
            for _ in 0..POOL_YIELDS {
                tokio::task::yield_now().await;
            }
        }
        ended
    }
}

impl OpenAiModel {
    /// The server sent `[DONE]`: read the closing chunk, so the connection is kept.
    pub(super) async fn end_finished<S>(
        &self,
        rest: Reading<'_, S>,
        state: &mut TurnState,
    ) -> Ending
    where
        S: Stream<Item = Result<Event, EventStreamError<Fault>>>,
    {
        if !self.slow_to_end.load(Ordering::Relaxed) && !rest.read_to_end(END_WAIT, state).await {
            tracing::debug!(
                "the server kept its stream open after [DONE]: its streams are dropped there from now on"
            );
            self.slow_to_end.store(true, Ordering::Relaxed);
        }
        Ending::Read
    }

    /// The turn is over before the server said so: wait briefly for a server that was sent the
    /// stop that fired, else cut.
    pub(super) async fn end_over<S>(
        &self,
        rest: Reading<'_, S>,
        state: &mut TurnState,
        sent_stops: Option<&[String]>,
    ) -> Ending
    where
        S: Stream<Item = Result<Event, EventStreamError<Fault>>>,
    {
        let why = state.over_why();
        let at_sent_stop = match (state.over_at_stop(), sent_stops) {
            (Some(fired), Some(sent)) => server_stops(sent).any(|s| s == fired),
            _ => false,
        };
        if !at_sent_stop || self.runs_past_stops.load(Ordering::Relaxed) {
            return Ending::Cut(why);
        }
        if rest.read_to_end(STOP_WAIT, state).await {
            return Ending::Read;
        }
        tracing::debug!("the server went on past a stop it was sent: cut at stops from now on");
        self.runs_past_stops.store(true, Ordering::Relaxed);
        Ending::Cut(why)
    }
}
