//! Finding a session from what a user types: a path, an id, `last`, or the start of an id.
//!
//! Ids are `YYYYMMDD-HHMMSS-PID-N` ([`super::new_id`]), so the start of an id is its time: a user
//! who types `20261125-2007` means the run of that minute, and gets it when it is the only one,
//! or the list of candidates when it is not. `last` is the newest session by the time recorded
//! in it (the `started` field of its first record), or by the time in its id when the first
//! record does not say; a file's modification time only breaks ties, since copying or touching
//! a file changes it.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::history::Record;
use super::read::open_regular;
use super::{SessionError, io_err};

/// The word that names the newest session.
pub const LAST: &str = "last";

/// How many ids an ambiguous prefix names in its error; the rest are counted.
const AMBIGUOUS_SHOWN: usize = 10;

/// How much of a transcript's first line is read to find when it started. The `run_started`
/// record puts `started` after the task, so a task longer than this leaves the id's time to
/// decide; nothing unbounded is read for a lookup.
const FIRST_LINE_MAX: u64 = 64 << 10;

/// The transcript file a user means by `query`, in the session folder `dir`:
///
/// * a path (it contains `/` or ends in `.jsonl`): that file, wherever it is;
/// * an id: `<dir>/<id>.jsonl`;
/// * `last`: the newest session in `dir` (see the module documentation);
/// * the start of one id: that session. A start shared by several ids is
///   [`SessionError::Ambiguous`], naming them; one shared by none is [`SessionError::NotFound`].
///
/// A bare file name in the working directory that is no id still works (older tagloops took it).
pub fn resolve(dir: &Path, query: &str) -> Result<PathBuf, SessionError> {
    let not_found = || SessionError::NotFound(query.to_string());
    if query.contains('/') || query.ends_with(".jsonl") {
        let p = Path::new(query);
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(not_found())
        };
    }
    if query.is_empty() {
        return Err(not_found());
    }
    let exact = dir.join(format!("{query}.jsonl"));
    if exact.is_file() {
        return Ok(exact);
    }
    if query == LAST {
        return newest(dir)?.ok_or_else(not_found);
    }
    let mut matches: Vec<String> = ids(dir)?
        .into_iter()
        .filter(|id| id.starts_with(query))
        .collect();
    match matches.len() {
        1 => Ok(dir.join(format!("{}.jsonl", matches[0]))),
        0 if Path::new(query).is_file() => Ok(PathBuf::from(query)),
        0 => Err(not_found()),
        n => {
            matches.sort_unstable();
            matches.truncate(AMBIGUOUS_SHOWN);
            Err(SessionError::Ambiguous {
                prefix: query.to_string(),
                more: n - matches.len(),
                ids: matches,
            })
        }
    }
}

/// The ids of the `.jsonl` files in `dir` (none when it does not exist).
fn ids(dir: &Path) -> Result<Vec<String>, SessionError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(dir)(e)),
    };
    Ok(entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_suffix(".jsonl").map(str::to_owned)
        })
        .collect())
}

/// The newest session of `dir`: by recorded start time, then file time, then id.
fn newest(dir: &Path) -> Result<Option<PathBuf>, SessionError> {
    let mut best: Option<((String, SystemTime, String), PathBuf)> = None;
    for id in ids(dir)? {
        let path = dir.join(format!("{id}.jsonl"));
        // Only regular files, as `tagloop sessions` lists them (no FIFO can hang the lookup).
        let Ok((file, _)) = open_regular(&path, false) else {
            continue;
        };
        let modified = file
            .metadata()
            .and_then(|m| m.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let started = first_started(file)
            .or_else(|| started_from_id(&id))
            .unwrap_or_default();
        let key = (started, modified, id);
        if best.as_ref().is_none_or(|(k, _)| key > *k) {
            best = Some((key, path));
        }
    }
    Ok(best.map(|(_, p)| p))
}

/// The `started` time of a transcript's first record, when its first line is a `run_started`
/// record that fits in [`FIRST_LINE_MAX`] bytes.
fn first_started(file: impl Read) -> Option<String> {
    let mut line = Vec::new();
    BufReader::new(file.take(FIRST_LINE_MAX))
        .read_until(b'\n', &mut line)
        .ok()?;
    match Record::from_line(&line) {
        Record::RunStarted { started, .. } if !started.is_empty() => Some(started),
        _ => None,
    }
}

/// The time in an id made by [`super::new_id`] (`20261125-200703-…`), as the RFC 3339 text a
/// `run_started` record holds (`2026-11-25T20:07:03Z`), so the two compare as strings.
pub(crate) fn started_from_id(id: &str) -> Option<String> {
    let b = id.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    if !(digits(0..8) && b.get(8) == Some(&b'-') && digits(9..15)) {
        return None;
    }
    Some(format!(
        "{}-{}-{}T{}:{}:{}Z",
        &id[0..4],
        &id[4..6],
        &id[6..8],
        &id[9..11],
        &id[11..13],
        &id[13..15]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, id: &str, first: &str) {
        std::fs::write(dir.join(format!("{id}.jsonl")), format!("{first}\n")).unwrap();
    }

    fn started(at: &str) -> String {
        format!(r#"{{"type":"run_started","task":"t","started":"{at}"}}"#)
    }

    /// A session folder holding one session, `20260105-000000-00001-0`, started on 5 January.
    fn with_first_session() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let at = started("2026-01-05T00:00:00Z");
        write(d.path(), "20260105-000000-00001-0", &at);
        d
    }

    #[test]
    fn ids_prefixes_last_and_paths_resolve() {
        let d = with_first_session();
        let dir = d.path();
        write(
            dir,
            "20260110-000000-00002-0",
            &started("2026-01-10T00:00:00Z"),
        );
        // Renamed, and its record says it is the newest.
        write(dir, "mine", &started("2026-01-20T00:00:00Z"));
        let name = |p: PathBuf| p.file_stem().unwrap().to_string_lossy().into_owned();
        assert_eq!(name(resolve(dir, "last").unwrap()), "mine");
        assert_eq!(
            name(resolve(dir, "20260105").unwrap()),
            "20260105-000000-00001-0"
        );
        assert_eq!(name(resolve(dir, "m").unwrap()), "mine");
        match resolve(dir, "202601") {
            Err(SessionError::Ambiguous { ids, more, .. }) => {
                assert_eq!(ids, ["20260105-000000-00001-0", "20260110-000000-00002-0"]);
                assert_eq!(more, 0);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(resolve(dir, "7"), Err(SessionError::NotFound(_))));
        assert!(matches!(resolve(dir, ""), Err(SessionError::NotFound(_))));
        // A path is taken as it is, not as a prefix.
        let p = dir.join("mine.jsonl");
        assert_eq!(
            resolve(Path::new("/nowhere"), p.to_str().unwrap()).unwrap(),
            p
        );
        assert!(matches!(
            resolve(dir, "other/mine.jsonl"),
            Err(SessionError::NotFound(_))
        ));
        // An empty folder, or none, has no `last`.
        assert!(matches!(
            resolve(&dir.join("none"), "last"),
            Err(SessionError::NotFound(_))
        ));
    }

    #[test]
    fn last_falls_back_to_the_time_in_the_id_and_skips_what_is_not_a_file() {
        let d = with_first_session();
        let dir = d.path();
        // No readable first record (a crash before it was written): the id's time counts.
        write(dir, "20260301-000000-00003-0", "");
        std::fs::create_dir(dir.join("20270101-000000-00009-0.jsonl")).unwrap();
        assert_eq!(
            resolve(dir, "last").unwrap(),
            dir.join("20260301-000000-00003-0.jsonl")
        );
        assert_eq!(
            started_from_id("20260301-120502-00003-0").as_deref(),
            Some("2026-03-01T12:05:02Z")
        );
        assert_eq!(started_from_id("2026030-120502"), None);
        assert_eq!(started_from_id("mine"), None);
    }

    #[test]
    fn an_ambiguous_prefix_names_at_most_ten_ids() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..25 {
            write(d.path(), &format!("20260105-0000{i:02}-00001-0"), "");
        }
        match resolve(d.path(), "2026") {
            Err(SessionError::Ambiguous { ids, more, .. }) => {
                assert_eq!((ids.len(), more), (10, 15));
            }
            other => panic!("{other:?}"),
        }
    }
}
