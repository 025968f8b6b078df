//! A pass-through request's one log line: method, path (the client's, escaped as outside text
//! is, the query left out since it may carry a secret), status, time, the answer's bytes
//! relayed and whether it ended. Never a header, never a body. A passed-through request is
//! not a conversation serve answered, so it has no transcript under `--session-dir`.

use std::time::Instant;

use tracing::info;

use crate::shown::Outside;

/// What the log line of a request says; written when it is dropped (at once for a refusal,
/// once the answer has gone out, or the client went away, for a relayed answer).
#[derive(Debug)]
pub(crate) struct Logged {
    method: String,
    path: String,
    pub(crate) status: u16,
    started: Instant,
    /// The answer's bytes passed on so far.
    pub(crate) bytes: u64,
    /// Whether the answer was relayed to its end (a refusal counts as ended).
    pub(crate) complete: bool,
}

impl Logged {
    /// The log line of a request to `method` `path`, begun at `started`.
    pub(crate) fn new(method: &str, path: &str, started: Instant) -> Logged {
        Logged {
            method: method.to_owned(),
            path: path.to_owned(),
            status: 0,
            started,
            bytes: 0,
            complete: false,
        }
    }

    /// The line of a request answered by serve itself (a refusal, an upstream failure).
    pub(crate) fn answered(mut self, status: u16) {
        self.status = status;
        self.complete = true;
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        info!(
            method = %Outside(&self.method),
            path = %Outside(&self.path),
            status = self.status,
            ms = self.started.elapsed().as_millis() as u64,
            passthrough = true,
            bytes = self.bytes,
            complete = self.complete,
            "request"
        );
    }
}
