//! What can go wrong with the queue, and which of it is worth trying again.

use redis::RedisError;

use super::MAX_ENTRY_BYTES;

/// What can go wrong with the queue.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// The queue address cannot be used.
    #[error("bad queue URL: {reason}")]
    Url {
        /// What is wrong, without the address itself (it may carry a password).
        reason: String,
    },
    /// Redis refused a command or could not be reached.
    #[error("redis at {queue} ({what}): {source}")]
    Redis {
        /// The queue, as shown (password hidden).
        queue: String,
        /// What tagloop was doing.
        what: &'static str,
        /// The client's error.
        source: RedisError,
    },
    /// A task to push is larger than [`MAX_ENTRY_BYTES`]; nothing was pushed.
    #[error(
        "task {key} is {bytes} bytes as a queue entry, more than the limit of {MAX_ENTRY_BYTES}"
    )]
    TaskTooLarge {
        /// The task's id, as text.
        key: String,
        /// Its size as an entry.
        bytes: usize,
    },
    /// The queue holds something tagloop did not write.
    #[error("queue {queue}: {detail}")]
    Data {
        /// The queue, as shown.
        queue: String,
        /// What was found.
        detail: String,
    },
}

impl QueueError {
    /// Whether trying again later may succeed: the connection dropped, timed out or was refused,
    /// or Redis is still loading its data.
    pub fn is_transient(&self) -> bool {
        match self {
            QueueError::Redis { source, .. } => is_transient(source),
            _ => false,
        }
    }
}

/// Why a queue entry cannot be run: anyone who can write to the Redis can add entries that
/// `tagloop queue push` would never write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BadEntry {
    /// The entry is larger than [`MAX_ENTRY_BYTES`]; its content was never read.
    #[error("the queue entry is {bytes} bytes, larger than the limit of {limit}")]
    TooLarge {
        /// Its size, field names and values together.
        bytes: u64,
        /// [`MAX_ENTRY_BYTES`].
        limit: usize,
    },
    /// The entry has no `id` field.
    #[error("the queue entry has no id field")]
    NoId,
    /// The `id` field is not UTF-8 text.
    #[error("the queue entry's id is not UTF-8 text")]
    IdNotText,
    /// The entry has no `task` field.
    #[error("the queue entry has no task field")]
    NoTask,
    /// The `task` field is not JSON.
    #[error("the queue entry's task is not JSON: {0}")]
    NotJson(String),
}

/// Whether Redis failed in a way that may pass: the connection, a timeout, or a server busy or
/// still loading.
pub(super) fn is_transient(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || matches!(
            e.code(),
            Some("LOADING" | "BUSY" | "TRYAGAIN" | "MASTERDOWN")
        )
}
