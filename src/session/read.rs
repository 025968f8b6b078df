//! Reading a transcript back: every record that parses, and where the damaged lines were.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde_json::Value;

use super::{SessionError, io_err};

/// The records of a transcript, with a note for each line that could not be read.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// Each readable line's JSON value, in file order (damaged lines are skipped: see `damaged`).
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

/// Open a transcript for reading only if it is a regular file, and say how long it is.
///
/// The file is opened with `O_NONBLOCK` (so a FIFO cannot hang the open) and, when
/// `follow_symlinks` is false, `O_NOFOLLOW`; its type is then checked on the open handle
/// (`fstat`), so a FIFO, a device (`/dev/zero`) or a socket put in its place is refused without
/// reading a byte and without a window between the check and the open.
pub(super) fn open_regular(
    path: &Path,
    follow_symlinks: bool,
) -> Result<(File, u64), SessionError> {
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

pub(super) fn read_records(path: &Path, file: impl Read) -> Result<Loaded, SessionError> {
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
