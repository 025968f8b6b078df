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

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;

use crate::secret::Redactor;

/// Errors of the session store.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A transcript could not be created, written or read.
    #[error("session file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// No session with that id or path exists.
    #[error("no session `{0}` (see `tagloop sessions` for the ids)")]
    NotFound(String),
    /// A record could not be serialised.
    #[error("cannot encode a transcript record: {0}")]
    Encode(#[from] serde_json::Error),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SessionError + '_ {
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

/// The transcript file of a session id, or the path itself when it names an existing file.
pub fn resolve(dir: &Path, id_or_path: &str) -> Result<PathBuf, SessionError> {
    let as_path = Path::new(id_or_path);
    if as_path.is_file() {
        return Ok(as_path.to_path_buf());
    }
    let p = dir.join(format!("{id_or_path}.jsonl"));
    if p.is_file() {
        Ok(p)
    } else {
        Err(SessionError::NotFound(id_or_path.to_string()))
    }
}

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

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The file.
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

/// The records of a transcript, with a note for each line that could not be read.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The records in order.
    pub records: Vec<Value>,
    /// One message per damaged line (skipped).
    pub warnings: Vec<String>,
    /// Where each damaged line was, in file order.
    pub damaged: Vec<Damaged>,
}

/// A line of a transcript that could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Damaged {
    /// Its line number in the file (from 1).
    pub line: usize,
    /// How many records were read before it: it sat just before `records[before]`.
    pub before: usize,
}

/// A damaged line inside the committed history of a transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hole {
    /// The damaged line (from 1).
    pub line: usize,
    /// The step whose commit record comes after it: the first step whose history is incomplete.
    pub step: u64,
}

/// What this module reads of a transcript record: the kinds that start a run or commit
/// progress, with the fields it needs (every other kind, and a record that does not fit, is
/// `Other`). The agent writes the records; reading them here keeps `session` below `agent`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Record {
    RunStarted {
        #[serde(default)]
        task: String,
        #[serde(default)]
        started: String,
    },
    StepCompleted {
        steps: Option<u64>,
    },
    Finished {
        #[serde(default)]
        outcome: Ended,
    },
    #[default]
    #[serde(other)]
    Other,
}

/// What this module reads of a `finished` record's outcome.
#[derive(Debug, Default, serde::Deserialize)]
struct Ended {
    status: Option<String>,
    steps: Option<u64>,
}

impl Record {
    fn read(value: &Value) -> Record {
        <Record as serde::Deserialize>::deserialize(value).unwrap_or_default()
    }

    /// The step a commit record commits (a `finished` record commits the last one).
    fn committed_step(&self) -> Option<u64> {
        match self {
            Record::StepCompleted { steps } => Some(steps.unwrap_or(0)),
            Record::Finished { outcome } => Some(outcome.steps.unwrap_or(0)),
            _ => None,
        }
    }
}

/// The damaged lines of `loaded` that leave a hole in its committed history, in file order.
///
/// A damaged line is a hole when the next record that commits or starts a run after it is a
/// commit (`step_completed` or `finished`): that commit covers the lost record. When it is a
/// `run_started` (a `continue`), or there is none (the end of the file), the line belonged to work
/// that was never committed, which a continued run redoes anyway.
pub fn holes(loaded: &Loaded) -> Vec<Hole> {
    let mut out = Vec::new();
    for d in &loaded.damaged {
        let next = loaded.records.iter().skip(d.before).find_map(|r| {
            let record = Record::read(r);
            match record {
                Record::RunStarted { .. } => Some(None),
                _ => record.committed_step().map(Some),
            }
        });
        if let Some(Some(step)) = next {
            out.push(Hole {
                line: d.line,
                step: step.max(1),
            });
        }
    }
    out
}

/// How many of `records` make up the history through step `step`: everything up to and including
/// the first `step_completed` record of that step. Step 0 is the start: the records before the
/// first step was committed. `None` when no step `step` was committed.
pub fn records_through_step(records: &[Value], step: u64) -> Option<usize> {
    if step == 0 {
        return Some(
            records
                .iter()
                .position(|r| Record::read(r).committed_step().is_some())
                .unwrap_or(records.len()),
        );
    }
    records
        .iter()
        .position(
            |r| matches!(Record::read(r), Record::StepCompleted { steps: Some(s) } if s == step),
        )
        .map(|i| i + 1)
}

/// Largest transcript `tagloop sessions` reads to summarise it; a larger one is listed with the
/// status `too_large` (replay and continue still read it when asked by name).
pub const LIST_MAX_BYTES: u64 = 64 << 20;

/// Open a transcript for reading only if it is a regular file, and say how long it is.
///
/// The file is opened with `O_NONBLOCK` (so a FIFO cannot hang the open) and, when
/// `follow_symlinks` is false, `O_NOFOLLOW`; its type is then checked on the open handle
/// (`fstat`), so a FIFO, a device (`/dev/zero`) or a socket put in its place is refused without
/// reading a byte and without a window between the check and the open.
fn open_regular(path: &Path, follow_symlinks: bool) -> Result<(File, u64), SessionError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut flags = libc::O_NONBLOCK;
    if !follow_symlinks {
        flags |= libc::O_NOFOLLOW;
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(io_err(path))?;
    let meta = file.metadata().map_err(io_err(path))?;
    if !meta.is_file() {
        return Err(io_err(path)(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        )));
    }
    Ok((file, meta.len()))
}

/// Read a transcript (a symlink to one is followed; anything but a regular file is refused).
pub fn load(path: &Path) -> Result<Loaded, SessionError> {
    let (file, _) = open_regular(path, true)?;
    read_records(path, file)
}

fn read_records(path: &Path, file: impl Read) -> Result<Loaded, SessionError> {
    let mut loaded = Loaded::default();
    for (i, line) in BufReader::new(file).split(b'\n').enumerate() {
        let line = line.map_err(io_err(path))?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(&line) {
            Ok(v) => loaded.records.push(v),
            Err(e) => {
                loaded.warnings.push(format!(
                    "{}: line {} is damaged and was skipped ({e})",
                    path.display(),
                    i + 1
                ));
                loaded.damaged.push(Damaged {
                    line: i + 1,
                    before: loaded.records.len(),
                });
            }
        }
    }
    Ok(loaded)
}

/// One line of `tagloop sessions`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// The session id.
    pub id: String,
    /// The status of the last run in it, or `incomplete` when it never finished.
    pub status: String,
    /// The task.
    pub task: String,
    /// Steps taken.
    pub steps: u64,
    /// When it started (RFC 3339).
    pub started: String,
}

/// Summarise a transcript from its records.
pub fn summarise(id: &str, records: &[Value]) -> Summary {
    let mut s = Summary {
        id: id.to_string(),
        status: "incomplete".into(),
        task: String::new(),
        steps: 0,
        started: String::new(),
    };
    for r in records {
        match Record::read(r) {
            Record::RunStarted { task, started } => {
                if s.started.is_empty() {
                    s.started = started;
                    s.task = task;
                }
                s.status = "incomplete".into();
            }
            Record::StepCompleted { steps } => s.steps = steps.unwrap_or(s.steps),
            Record::Finished { outcome } => {
                s.status = outcome.status.unwrap_or_else(|| "error".into());
                s.steps = outcome.steps.unwrap_or(s.steps);
            }
            Record::Other => {}
        }
    }
    s
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
            let mut s = summarise(&id, &[]);
            s.status = "too_large".into();
            out.push(s);
        } else if let Ok(loaded) = read_records(&path, file.take(LIST_MAX_BYTES)) {
            out.push(summarise(&id, &loaded.records));
        }
    }
    out.sort_by(|a, b| b.started.cmp(&a.started).then(b.id.cmp(&a.id)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
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

    fn lines(text: &str) -> Loaded {
        read_records(Path::new("t.jsonl"), text.as_bytes()).unwrap()
    }

    #[test]
    fn a_damaged_line_is_a_hole_only_when_a_later_commit_covers_it() {
        let start = r#"{"type":"run_started","task":"t"}"#;
        let msg = r#"{"type":"message"}"#;
        let step = |n: u32| format!(r#"{{"type":"step_completed","steps":{n}}}"#);
        let fin = r#"{"type":"finished","outcome":{"status":"ok","steps":3}}"#;
        // Inside step 2: a hole named by the step that committed it.
        let text = [start, msg, &step(1), msg, "{bad", &step(2), fin].join("\n");
        let loaded = lines(&text);
        assert_eq!(holes(&loaded), vec![Hole { line: 5, step: 2 }]);
        // Inside the last, uncommitted step, then a continuation started: no hole.
        let text = [start, &step(1), msg, "{bad", start, msg, &step(2)].join("\n");
        assert_eq!(holes(&lines(&text)), vec![]);
        // Covered by the final record.
        let text = [start, &step(1), "{bad", fin].join("\n");
        assert_eq!(holes(&lines(&text)), vec![Hole { line: 3, step: 3 }]);
    }

    #[test]
    fn records_through_a_step_end_at_its_commit() {
        let loaded = lines(
            r#"{"type":"run_started"}
{"type":"message"}
{"type":"step_completed","steps":1}
{"type":"message"}
{"type":"step_completed","steps":2}
{"type":"message"}"#,
        );
        let r = &loaded.records;
        assert_eq!(records_through_step(r, 0), Some(2));
        assert_eq!(records_through_step(r, 1), Some(3));
        assert_eq!(records_through_step(r, 2), Some(5));
        assert_eq!(records_through_step(r, 3), None);
    }

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
        assert!(matches!(
            resolve(dir.path(), "zzz"),
            Err(SessionError::NotFound(_))
        ));
        assert!(resolve(dir.path(), "a").is_ok());
    }

    #[test]
    fn ids_are_unique() {
        let a = new_id();
        let b = new_id();
        assert_ne!(a, b);
        assert!(Transcript::create(&std::env::temp_dir().join("tagloop-id-test"), &a).is_ok());
    }
}
