//! Transcripts on disk.
//!
//! A session is one JSON Lines file, `<session dir>/<id>.jsonl`, one record per event, written and
//! flushed as each event happens, so a run killed at any point (SIGKILL included) leaves every
//! completed step on disk. This module only stores and reads records; what they mean is the
//! agent's business (`agent::Resume`).
//!
//! A damaged line is reported and skipped when reading, never fatal to reading. Where it sits
//! decides what it means for `continue` ([`holes`]): a line torn by a kill at the end of a run
//! only loses work that was not committed yet and is done again, but a damaged line that a later
//! `step_completed` or `finished` record commits across is a hole in the history, and a run
//! continued over it would send the model a conversation with a message missing.
//!
//! The files: this one holds the errors, the session ids and where transcripts live;
//! `transcript` writes a session, `read` reads one back (with its damaged lines), `history` reads
//! what the records commit, `list` summarises a directory of sessions, and `lookup` finds the
//! session a user means (a path, an id, `last`, the start of an id).

mod error;
mod history;
mod list;
mod lookup;
mod read;
mod transcript;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::SystemTime;

pub use error::SessionError;
// What `tagloop continue`, `tagloop sessions` and the session names a user types need (the holes a
// continued run refuses, the listing and its bounds, `last` and id prefixes): public only because
// the binary is a separate crate on this library. Hidden: not part of the library's API.
#[doc(hidden)]
pub use history::{Hole, holes, records_through_step};
#[doc(hidden)]
pub use list::{LIST_MAX_BYTES, LISTED_TASK_CHARS, Summary, list, summarise};
#[doc(hidden)]
pub use lookup::{LAST, resolve};
pub use read::{Damaged, Loaded, load};
pub use transcript::Transcript;

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SessionError + '_ {
    move |source| SessionError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The default session directory: `<user data dir>/tagloop/sessions`.
pub fn default_dir() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join("tagloop")
        .join("sessions")
}

/// A new session id: UTC time to the second, the process id and a counter, so ids sort by time
/// and never collide between concurrent runs.
pub fn new_id() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let now = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let stamp: String = now.chars().filter(|c| c.is_ascii_digit()).collect();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "{}-{}-{:05}-{n}",
        &stamp[..8.min(stamp.len())],
        &stamp[8.min(stamp.len())..],
        std::process::id()
    )
}

/// The current time as RFC 3339 (UTC, seconds).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique() {
        let a = new_id();
        let b = new_id();
        assert_ne!(a, b);
        assert!(Transcript::create(&std::env::temp_dir().join("tagloop-id-test"), &a).is_ok());
    }

    #[test]
    fn an_id_resolves_to_its_file_and_an_unknown_one_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        Transcript::create(dir.path(), "a").unwrap();
        assert!(matches!(
            resolve(dir.path(), "zzz"),
            Err(SessionError::NotFound(_))
        ));
        assert!(resolve(dir.path(), "a").is_ok());
    }

    #[test]
    fn a_new_id_carries_its_time() {
        let id = new_id();
        let at = lookup::started_from_id(&id).unwrap();
        assert!(at.len() == 20 && at.ends_with('Z'), "{at}");
    }
}
