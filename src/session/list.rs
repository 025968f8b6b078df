//! `tagloop sessions`: one summary per transcript in a directory.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use super::history::Record;
use super::read::open_regular;
use super::{SessionError, io_err};

/// Largest transcript `tagloop sessions` reads to summarise it; a larger one is listed with the
/// status `too_large` (replay and continue still read it when asked by name).
pub const LIST_MAX_BYTES: u64 = 64 << 20;

/// One line of `tagloop sessions`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// The session id: the transcript's file name without `.jsonl`.
    pub id: String,
    /// The status of the last run in it: the outcome's (`ok`, `max_steps`, `error`, …),
    /// `incomplete` when it started and never finished (killed, or still running), `error` when
    /// it holds no run at all (a run that died before writing its first record), `too_large`.
    pub status: String,
    /// The task, its first [`LISTED_TASK_CHARS`] characters (then `…`): the whole task is in the
    /// transcript.
    pub task: String,
    /// Steps taken.
    pub steps: u64,
    /// When it started (RFC 3339): from its first record, else from the time in its id, else
    /// empty.
    pub started: String,
}

/// How much of a task a listing keeps: a listing of many sessions with long tasks would
/// otherwise hold every task whole (a 1 MB task each, 100 MB for 100 of them).
pub const LISTED_TASK_CHARS: usize = 1000;

impl Summary {
    /// The summary of a session with no records: an `error`, since every run writes its
    /// `run_started` record before it waits for anything (`run` creates the transcript only once
    /// the run can start), so a file without one is a run that died at its start.
    fn empty(id: &str) -> Summary {
        Summary {
            id: id.to_string(),
            status: "error".into(),
            task: String::new(),
            steps: 0,
            started: String::new(),
        }
    }

    /// The summary once every record was read: the start time from the id when no record
    /// gave one.
    fn done(mut self) -> Summary {
        if self.started.is_empty() {
            self.started = super::lookup::started_from_id(&self.id).unwrap_or_default();
        }
        self
    }

    /// Take the next record into account.
    fn add(&mut self, record: Record) {
        match record {
            Record::RunStarted { task, started } => {
                if self.started.is_empty() {
                    self.started = started;
                    self.task = crate::text::clip_chars(&task, LISTED_TASK_CHARS);
                }
                self.status = "incomplete".into();
            }
            Record::StepCompleted { steps } => self.steps = steps.unwrap_or(self.steps),
            Record::Finished { outcome } => {
                self.status = outcome.status.unwrap_or_else(|| "error".into());
                self.steps = outcome.steps.unwrap_or(self.steps);
            }
            Record::Other => {}
        }
    }
}

/// Summarise a transcript from its records.
pub fn summarise(id: &str, records: &[Value]) -> Summary {
    let mut s = Summary::empty(id);
    for r in records {
        s.add(Record::read(r));
    }
    s.done()
}

/// Summarise a transcript as it is read, one line at a time, without building its records:
/// the memory is one line (at most [`LIST_MAX_BYTES`], the bound `file` is read to) and the
/// summary's fields, whatever the records hold.
fn summarise_lines(id: &str, file: impl Read) -> std::io::Result<Summary> {
    let mut s = Summary::empty(id);
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(s.done());
        }
        s.add(Record::from_line(&line));
    }
}

/// Every session in a directory, newest first. Only regular `.jsonl` files are read (symlinks,
/// FIFOs and devices are skipped: the file is checked on its open handle); a file over [`LIST_MAX_BYTES`] is listed
/// as `too_large` without being read; unreadable files are skipped.
pub fn list(dir: &Path) -> Result<Vec<Summary>, SessionError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(io_err(dir)(e)),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        let Some(id) = path.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
            continue;
        };
        let Ok((file, len)) = open_regular(&path, false) else {
            tracing::debug!(path = %path.display(), "not a regular file: skipped");
            continue;
        };
        if len > LIST_MAX_BYTES {
            let mut s = Summary::empty(&id);
            s.status = "too_large".into();
            out.push(s.done());
        } else if let Ok(s) = summarise_lines(&id, file.take(LIST_MAX_BYTES)) {
            out.push(s);
        }
    }
    out.sort_by(|a, b| b.started.cmp(&a.started).then(b.id.cmp(&a.id)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Transcript;
    use serde_json::json;

    #[test]
    fn list_is_newest_first_and_marks_incomplete_runs() {
        let dir = tempfile::tempdir().unwrap();
        for (id, started, done) in [
            ("a", "2026-01-01T00:00:00Z", true),
            ("b", "2026-02-01T00:00:00Z", false),
        ] {
            let mut t = Transcript::create(dir.path(), id).unwrap();
            t.append(&json!({"type": "run_started", "task": id, "started": started}))
                .unwrap();
            if done {
                t.append(
                    &json!({"type": "finished", "outcome": {"status": "max_steps", "steps": 3}}),
                )
                .unwrap();
            }
        }
        let l = list(dir.path()).unwrap();
        assert_eq!(
            l.iter()
                .map(|s| (s.id.as_str(), s.status.as_str()))
                .collect::<Vec<_>>(),
            [("b", "incomplete"), ("a", "max_steps")]
        );
    }

    #[test]
    fn a_transcript_without_a_run_is_an_error_dated_by_its_id() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("20260301-101500-00042-0.jsonl"), "").unwrap();
        std::fs::write(dir.path().join("renamed.jsonl"), "{torn").unwrap();
        let l = list(dir.path()).unwrap();
        let got: Vec<_> = l
            .iter()
            .map(|s| (s.id.as_str(), s.status.as_str(), s.started.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("20260301-101500-00042-0", "error", "2026-03-01T10:15:00Z"),
                ("renamed", "error", "")
            ]
        );
    }

    #[test]
    fn a_listed_summary_is_the_summary_of_the_loaded_records() {
        let dir = tempfile::tempdir().unwrap();
        let text = [
            r#"{"type":"run_started","task":"first","started":"2026-01-01T00:00:00Z"}"#,
            r#"{"type":"message","message":{"content":[1,2,3]}}"#,
            "{torn",
            r#"{"type":"step_completed","steps":1}"#,
            r#"{"type":"finished","outcome":{"status":"max_steps","steps":1}}"#,
            r#"{"type":"run_started","task":"again","started":"2026-01-02T00:00:00Z"}"#,
            r#"{"type":"step_completed","steps":2}"#,
            "",
        ]
        .join("\n");
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, text).unwrap();
        let loaded = crate::session::load(&path).unwrap();
        let listed = list(dir.path()).unwrap();
        assert_eq!(listed, vec![summarise("s", &loaded.records)]);
        assert_eq!(
            (
                listed[0].task.as_str(),
                listed[0].status.as_str(),
                listed[0].steps
            ),
            ("first", "incomplete", 2)
        );
    }
}
