//! A durable task queue on Redis Streams, shared by `tagloop queue` and `tagloop worker`.
//!
//! # Layout
//!
//! A queue named `NAME` is five keys with one hash tag, so a Redis Cluster keeps them together:
//!
//! | key | type | holds |
//! |---|---|---|
//! | `tagloop:{NAME}:tasks` | stream, consumer group `workers` | one entry per queued task: `id`, `task` (the JSON line) |
//! | `tagloop:{NAME}:known` | hash | every id ever pushed → its stream entry id (push order) |
//! | `tagloop:{NAME}:results` | hash | id → the result line, as `batch` writes it |
//! | `tagloop:{NAME}:failed` | set | ids whose stored result is not `ok` |
//! | `tagloop:{NAME}:workers` | hash | worker name → when it was last seen (ms since the epoch) |
//!
//! # Guarantees
//!
//! * **Once per id on push**: pushing checks `known` and adds to the stream in one script, so a
//!   re-push (or two pushers racing) adds nothing for an id already queued, running or done.
//! * **At-least-once delivery**: a task read by a worker stays pending in the group until its
//!   result is stored. A worker keeps the tasks it runs alive (their idle time is reset every few
//!   seconds); a task whose worker stopped doing so for `claim_after` is claimed by another worker
//!   with `XAUTOCLAIM`.
//! * **Exactly one result per id**: the result is stored with `HSETNX` and the entry acknowledged
//!   and deleted in the same script; when two workers finish one task, the first stored wins and
//!   the second is dropped.
//!
//! Counts: `queued + running + done + failed` is the number of ids pushed; `done` are results
//! with status `ok`, `failed` the others, `running` the entries delivered and not yet settled.
//!
//! # Files
//!
//! `keys.rs` names the keys; `connection.rs` holds the [`Queue`] handle and its connections; the
//! operations are grouped by who uses them: `tasks.rs` (push, take, claim), `settle.rs` (store,
//! keep alive, hand back, leave) and `report.rs` (status, results). The Lua scripts, which make
//! each step atomic, are the `.lua` files beside them.

mod connection;
mod error;
mod keys;
mod report;
mod scripts;
mod settle;
mod tasks;
mod url;

use std::time::Duration;

use serde_json::Value;

pub use connection::Queue;
pub use error::{BadEntry, QueueError};
pub use url::QueueUrl;

/// The consumer group every worker reads through.
pub const GROUP: &str = "workers";

/// A worker not seen for this long is no longer counted by [`Queue::status`].
pub const WORKER_SEEN_WINDOW: Duration = Duration::from_secs(60);

/// The most bytes one queue entry may hold, its field names and values together. Redis checks
/// it before an entry is sent to a worker, so a worker never reads more than this per task (a
/// larger entry becomes that task's error result), and [`Queue::push`] refuses larger tasks.
pub const MAX_ENTRY_BYTES: usize = 8 << 20;

/// One queue entry handed to a worker; storing a result under `key` (an error result for a bad
/// entry included) settles it.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// The stream entry id (what is acknowledged).
    pub entry: String,
    /// The task's id, as text; the stream entry id for an entry without a usable id.
    pub key: String,
    /// The task line as pushed, or why the entry cannot be run. A worker stores the latter as
    /// the task's error result under `key`, which settles the entry like any other result.
    pub task: Result<Value, BadEntry>,
    /// How many times the entry has been delivered, this time included (1 for a fresh task).
    pub deliveries: u64,
}

/// The queue's counts, from [`Queue::status`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct QueueStatus {
    /// Pushed and not yet taken by a worker.
    pub queued: u64,
    /// Taken by a worker and not yet settled (including tasks of dead workers not yet claimed).
    pub running: u64,
    /// Results with status `ok`.
    pub done: u64,
    /// Results with any other status.
    pub failed: u64,
    /// Workers seen in the last minute.
    pub workers: u64,
    /// Their names, sorted, exactly as stored (bytes that are not UTF-8 replaced by U+FFFD).
    /// Any client of the Redis can write a name: escape them before showing them on a terminal.
    pub worker_names: Vec<String>,
}

impl QueueStatus {
    /// Nothing queued and nothing running.
    pub fn is_settled(&self) -> bool {
        self.queued == 0 && self.running == 0
    }
}

/// What a push did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PushReport {
    /// Tasks added to the queue.
    pub added: u64,
    /// Tasks whose id the queue already had (queued, running or done).
    pub skipped: u64,
}

/// Now, in milliseconds since the epoch (0 if the clock is before it).
pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
