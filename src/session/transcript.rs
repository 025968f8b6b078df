//! Writing a transcript: one record per line, staged and flushed at step boundaries.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::secret::Redactor;

use super::{SessionError, io_err};

/// An open transcript, appended to one record at a time.
#[derive(Debug)]
pub struct Transcript {
    id: String,
    path: PathBuf,
    file: File,
    /// Secrets removed from every record before it is written (defence in depth: the agent and
    /// the model client already redact what they know of).
    redactor: Redactor,
    /// Records staged by [`Transcript::stage`], written together by [`Transcript::flush`].
    pending: Vec<u8>,
}

impl Drop for Transcript {
    /// Staged records are written, not lost, when the transcript is dropped.
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

impl Transcript {
    /// Create the transcript of a new session (the directory is created if needed).
    pub fn create(dir: &Path, id: &str) -> Result<Self, SessionError> {
        let path = dir.join(format!("{id}.jsonl"));
        let open = || OpenOptions::new().create_new(true).append(true).open(&path);
        // The folder is made when it is missing (a batch creates many files in one folder: one
        // `mkdir` each would be a path walk for nothing).
        let file = match open() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir).map_err(io_err(dir))?;
                open()
            }
            other => other,
        }
        .map_err(io_err(&path))?;
        Ok(Transcript {
            id: id.to_string(),
            path,
            file,
            redactor: Redactor::new(),
            pending: Vec::new(),
        })
    }

    /// Open an existing transcript to append to it (continuing a session). A last line cut off by
    /// a kill is ended first so new records start on a line of their own.
    pub fn open_append(path: &Path) -> Result<Self, SessionError> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(path)
            .map_err(io_err(path))?;
        let len = file.metadata().map_err(io_err(path))?.len();
        if len > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(len - 1)).map_err(io_err(path))?;
            file.read_exact(&mut last).map_err(io_err(path))?;
            if last[0] != b'\n' {
                file.write_all(b"\n").map_err(io_err(path))?;
            }
        }
        let id = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Transcript {
            id,
            path: path.to_path_buf(),
            file,
            redactor: Redactor::new(),
            pending: Vec::new(),
        })
    }

    /// Remove these secrets from every record written from now on.
    pub fn redacting(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// The session id: the transcript's file name without `.jsonl`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The transcript file, `<id>.jsonl` in the session directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one record as one line and hand it to the operating system at once (with any
    /// staged records before it).
    pub fn append<T: Serialize + ?Sized>(&mut self, record: &T) -> Result<(), SessionError> {
        self.stage(record)?;
        self.flush()
    }

    /// Add one record to the lines written by the next [`Transcript::flush`] (or `append`, or
    /// the drop of the transcript). The agent loop stages records and flushes before each wait
    /// (a model call, a tool call that does not finish at once) and at the run's end: nothing
    /// staged ever waits, so the file is complete at every step boundary, at one or two writes
    /// per step instead of one per record.
    pub fn stage<T: Serialize + ?Sized>(&mut self, record: &T) -> Result<(), SessionError> {
        let start = self.pending.len();
        let written = if self.redactor.is_empty() {
            serde_json::to_writer(&mut self.pending, record)
        } else {
            serde_json::to_value(record).and_then(|mut value| {
                self.redactor.redact_json(&mut value);
                serde_json::to_writer(&mut self.pending, &value)
            })
        };
        if let Err(e) = written {
            self.pending.truncate(start);
            return Err(e.into());
        }
        self.pending.push(b'\n');
        Ok(())
    }

    /// Write the staged records, whole lines only, in one write.
    pub fn flush(&mut self) -> Result<(), SessionError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let result = self
            .file
            .write_all(&self.pending)
            .map_err(io_err(&self.path));
        self.pending.clear();
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{Damaged, holes, load, summarise};
    use serde_json::json;

    #[test]
    fn records_round_trip_and_damaged_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = Transcript::create(dir.path(), "s1").unwrap();
        t.append(&json!({"type": "run_started", "task": "t", "started": "2026-01-01T00:00:00Z"}))
            .unwrap();
        t.append(&json!({"type": "step_completed", "steps": 1}))
            .unwrap();
        // A kill in the middle of a write leaves half a line.
        std::fs::OpenOptions::new()
            .append(true)
            .open(t.path())
            .unwrap()
            .write_all(b"{\"type\": \"mess")
            .unwrap();
        let loaded = load(t.path()).unwrap();
        assert_eq!(loaded.records.len(), 2);
        assert_eq!(loaded.warnings.len(), 1);
        assert!(loaded.warnings[0].contains("line 3 is damaged"));
        assert_eq!(loaded.damaged, vec![Damaged { line: 3, before: 2 }]);
        // A torn last line lost only uncommitted work: no hole.
        assert_eq!(holes(&loaded), vec![]);

        // Continuing ends the damaged line first.
        let mut t2 = Transcript::open_append(t.path()).unwrap();
        t2.append(&json!({"type": "finished", "outcome": {"status": "ok", "steps": 2}}))
            .unwrap();
        let loaded = load(t.path()).unwrap();
        assert_eq!(loaded.records.len(), 3);
        let s = summarise("s1", &loaded.records);
        assert_eq!(
            (s.status.as_str(), s.steps, s.task.as_str()),
            ("ok", 2, "t")
        );
    }
}
