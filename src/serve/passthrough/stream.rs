//! The upstream's answer going back to the client as it arrives: each piece passed on when it
//! comes (a server-sent event is flushed as the upstream flushed it), nothing kept but the few
//! bytes that may begin the upstream key (`secret/stream.rs` holds back at most the key's
//! longest form). Memory is bounded whatever the answer's size: the client's connection pulls
//! the pieces, so a slow client slows the upstream's reading instead of filling a buffer.
//!
//! The answer ends by the request's deadline; an upstream that breaks off, falls silent past
//! the idle limit or runs past the deadline has the client's connection cut (a pass-through
//! knows no format in which to say so: a half answer must read as one). The request's
//! concurrency slot is held until the answer has gone out or the client went away, and the
//! request's log line is written then, with the bytes relayed and whether the answer ended.

use axum::body::Body;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::timeout_at;

use super::log::Logged;
use crate::secret::{ByteStreamRedactor, Redactor};
use crate::shown::Outside;

/// An answer's body being relayed.
struct Relay {
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    deadline: tokio::time::Instant,
    redact: ByteStreamRedactor,
    /// The request's log line, written when the relay is dropped.
    logged: Logged,
    /// Held while the answer streams: it counts against `--concurrency`.
    _slot: OwnedSemaphorePermit,
    done: bool,
}

/// The client's body for the upstream's `response`: its bytes as they arrive, redacted.
pub(crate) fn relay(
    response: reqwest::Response,
    deadline: tokio::time::Instant,
    redactor: &Redactor,
    slot: OwnedSemaphorePermit,
    logged: Logged,
) -> Body {
    let relay = Relay {
        body: response.bytes_stream().boxed(),
        deadline,
        redact: ByteStreamRedactor::new(redactor.clone()),
        logged,
        _slot: slot,
        done: false,
    };
    Body::from_stream(futures::stream::unfold(relay, next_piece))
}

/// The next piece for the client: redacted bytes, the end, or an error that cuts the
/// connection. Pieces the redactor holds back whole are waited past.
async fn next_piece(mut relay: Relay) -> Option<(Result<Bytes, std::io::Error>, Relay)> {
    if relay.done {
        return None;
    }
    loop {
        let why = match timeout_at(relay.deadline, relay.body.next()).await {
            Ok(Some(Ok(bytes))) => {
                let safe = relay.redact.push(&bytes);
                if safe.is_empty() {
                    continue;
                }
                relay.logged.bytes += safe.len() as u64;
                return Some((Ok(Bytes::from(safe)), relay));
            }
            Ok(None) => {
                relay.done = true;
                relay.logged.complete = true;
                let rest = relay.redact.finish();
                if rest.is_empty() {
                    return None;
                }
                relay.logged.bytes += rest.len() as u64;
                return Some((Ok(Bytes::from(rest)), relay));
            }
            Ok(Some(Err(e))) => {
                tracing::warn!(error = %Outside(&e), "a passed-through answer broke off upstream");
                "the upstream's answer broke off"
            }
            Err(_) => {
                tracing::warn!("a passed-through answer ran past the request's time limit");
                "the upstream's answer ran past the time limit"
            }
        };
        // What was held back is not sent: the answer is cut, and its end is lost either way.
        relay.done = true;
        return Some((Err(std::io::Error::other(why)), relay));
    }
}
