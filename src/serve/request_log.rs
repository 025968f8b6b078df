//! The one log line of a request (method, path, status, time, what it cost upstream): never a
//! key, never a prompt. A handler starts a [`RequestLog`] as the request arrives and ends it with
//! the response; a streamed answer's task writes its line when the stream ends.

use std::time::Instant;

use axum::response::Response;
use tracing::info;

use super::core::Trace;

/// The one log line of a request: never a key, never a prompt.
pub(crate) fn log_line(
    method: &str,
    path: &str,
    response: &Response,
    started: Instant,
    trace: &Trace,
) {
    if !trace.logged {
        log_status(method, path, response.status().as_u16(), started, trace);
    }
}

/// A request's log line in the making: when the request started and what it cost upstream,
/// written by [`RequestLog::end`] with the response's status (see [`log_line`]).
pub(crate) struct RequestLog {
    /// When the request arrived.
    pub started: Instant,
    /// What answering it cost (filled in by the handler).
    pub trace: Trace,
}

impl RequestLog {
    /// A request that arrives now.
    pub(crate) fn start() -> Self {
        RequestLog {
            started: Instant::now(),
            trace: Trace::default(),
        }
    }

    /// Write the request's log line for `response`, and hand the response on.
    pub(crate) fn end(self, method: &str, path: &str, response: Response) -> Response {
        log_line(method, path, &response, self.started, &self.trace);
        response
    }
}

/// [`log_line`] for a status known without the response (a streamed answer's, at its end).
pub(crate) fn log_status(method: &str, path: &str, status: u16, started: Instant, trace: &Trace) {
    // The line's target stays the one it had in `http.rs`, so that `RUST_LOG` filters and
    // log readers keep finding it.
    info!(
        target: "tagloop::serve::http",
        method,
        path,
        status,
        ms = started.elapsed().as_millis() as u64,
        upstream_requests = trace.requests,
        prompt_tokens = trace.usage.prompt_tokens,
        completion_tokens = trace.usage.completion_tokens,
        "request"
    );
}
