//! Where the CLI's log lines go: stderr, on the live view's line discipline (a log line never
//! lands inside text the live view is streaming).

use std::io::Write;
use std::sync::{Mutex, MutexGuard};

use tracing_subscriber::fmt::MakeWriter;

/// Whether the last thing the live view wrote on stderr left the cursor in the middle of a line
/// (a turn still streaming). Shared by every [`Live`](super::live::Live) and by [`LogWriter`], and held while either
/// writes, so a log line never lands inside streamed text: it starts on a line of its own.
static MID_LINE: Mutex<bool> = Mutex::new(false);

/// The [`MID_LINE`] lock; a panic elsewhere while it was held leaves a usable flag.
pub(super) fn mid_line() -> MutexGuard<'static, bool> {
    MID_LINE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Where the CLI's log lines go ([`tracing_subscriber::fmt`]'s writer): stderr, always starting
/// on a line of their own, never inside a turn the live view is streaming.
pub struct LogWriter;

/// One log write, holding the live view's line state while it writes.
pub struct LogLine(MutexGuard<'static, bool>);

impl<'a> MakeWriter<'a> for LogWriter {
    type Writer = LogLine;

    fn make_writer(&'a self) -> LogLine {
        LogLine(mid_line())
    }
}

impl Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut err = std::io::stderr().lock();
        if std::mem::take(&mut *self.0) {
            err.write_all(b"\n")?;
        }
        err.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
