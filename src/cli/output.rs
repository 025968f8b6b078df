//! A command's output on stdout, and what it means when nobody reads it any more.
//!
//! `tagloop sessions | head -3` closes the pipe after three lines. Rust ignores `SIGPIPE`, so
//! the next write fails with `EPIPE`; `println!` turns that into a panic (exit 101), which is
//! why no command writes its output with it. Every command writes through [`stdout`] instead and
//! propagates the error with `?`: a write that finds the reader gone becomes [`ReaderGone`], and
//! `cli::main` ends such a command quietly with exit 0, the way `cat` or `ls` do in a pipe.
//! (Restoring `SIGPIPE`'s default action would end tagloop silently too, but with a signal's exit
//! status, and without killing the commands it started.)
//!
//! Only failed writes to stdout are marked: a broken pipe anywhere else (an MCP server that
//! died, say) stays the error it is.

use std::io::{self, StdoutLock, Write};

/// The reader of stdout went away (the other end of a pipe was closed). Carried inside the
/// `io::Error` a write to [`stdout`] returns.
#[derive(Debug, thiserror::Error)]
#[error("the reader of stdout went away")]
pub struct ReaderGone;

/// stdout for a command's output: styled only on a terminal, never with `NO_COLOR` (anstream
/// strips the styles otherwise), and a closed pipe reported as [`ReaderGone`].
pub fn stdout() -> Stdout {
    Stdout(anstream::stdout().lock())
}

/// See [`stdout`].
pub struct Stdout(anstream::AutoStream<StdoutLock<'static>>);

/// The same error, marked as [`ReaderGone`] when it says the pipe is broken.
fn mark(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::BrokenPipe {
        io::Error::new(io::ErrorKind::BrokenPipe, ReaderGone)
    } else {
        e
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(mark)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(mark)
    }
}

/// Whether `e` says a write to [`stdout`] found its reader gone.
pub fn reader_gone(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.is::<ReaderGone>()
            || c.downcast_ref::<io::Error>()
                .and_then(io::Error::get_ref)
                .is_some_and(|inner| inner.is::<ReaderGone>())
    })
}

/// `result`, with a reader that went away taken as success: for the commands whose exit code
/// says how a run ended (`run`, `continue`, `wrap`), which a closed pipe does not change.
pub fn unless_reader_gone(result: anyhow::Result<()>) -> anyhow::Result<()> {
    match result {
        Err(e) if reader_gone(&e) => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn only_a_marked_broken_pipe_is_a_reader_gone() {
        let gone: anyhow::Error = mark(io::Error::from(io::ErrorKind::BrokenPipe)).into();
        assert!(reader_gone(&gone));
        assert!(reader_gone(&gone.context("printing the list")));
        let other = io::Error::from(io::ErrorKind::BrokenPipe);
        assert!(!reader_gone(&anyhow::Error::from(other)));
        let full: anyhow::Error = mark(io::Error::from(io::ErrorKind::StorageFull)).into();
        assert!(!reader_gone(&full));
        let r: anyhow::Result<()> = Err(io::Error::from(io::ErrorKind::BrokenPipe)).context("x");
        assert!(!reader_gone(&r.unwrap_err()));
    }
}
