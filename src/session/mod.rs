//! Transcripts on disk.
//!
//! A session is one JSON Lines file, `<session dir>/<id>.jsonl`, one record per event, written and
//! flushed as each event happens, so a run killed at any point (SIGKILL included) leaves every
//! completed step on disk. This module only stores and reads records; what they mean is the
//! agent's business (`agent::Resume`).
//!
//! A damaged line (a run killed in the middle of a write) is reported and skipped when reading,
//! never fatal.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;

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
}

impl Transcript {
    /// Create the transcript of a new session (the directory is created if needed).
    pub fn create(dir: &Path, id: &str) -> Result<Self, SessionError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let path = dir.join(format!("{id}.jsonl"));
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(io_err(&path))?;
        Ok(Transcript {
            id: id.to_string(),
            path,
            file,
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
        })
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one record as one line and hand it to the operating system at once.
    pub fn append<T: Serialize + ?Sized>(&mut self, record: &T) -> Result<(), SessionError> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        self.file.write_all(&line).map_err(io_err(&self.path))?;
        self.file.flush().map_err(io_err(&self.path))
    }
}

/// The records of a transcript, with a note for each line that could not be read.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The records in order.
    pub records: Vec<Value>,
    /// One message per damaged line (skipped).
    pub warnings: Vec<String>,
}

/// Read a transcript.
pub fn load(path: &Path) -> Result<Loaded, SessionError> {
    let file = File::open(path).map_err(io_err(path))?;
    let mut loaded = Loaded::default();
    for (i, line) in BufReader::new(file).split(b'\n').enumerate() {
        let line = line.map_err(io_err(path))?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(&line) {
            Ok(v) => loaded.records.push(v),
            Err(e) => loaded.warnings.push(format!(
                "{}: line {} is damaged and was skipped ({e})",
                path.display(),
                i + 1
            )),
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
        match r.get("type").and_then(Value::as_str) {
            Some("run_started") => {
                if s.started.is_empty() {
                    s.started = r
                        .get("started")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    s.task = r
                        .get("task")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                }
                s.status = "incomplete".into();
            }
            Some("step_completed") => {
                s.steps = r.get("steps").and_then(Value::as_u64).unwrap_or(s.steps)
            }
            Some("finished") => {
                let o = r.get("outcome");
                s.status = o
                    .and_then(|o| o.get("status"))
                    .and_then(Value::as_str)
                    .unwrap_or("error")
                    .to_string();
                s.steps = o
                    .and_then(|o| o.get("steps"))
                    .and_then(Value::as_u64)
                    .unwrap_or(s.steps);
            }
            _ => {}
        }
    }
    s
}

/// Every session in a directory, newest first. Unreadable files are skipped.
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
        if let Ok(loaded) = load(&path) {
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
