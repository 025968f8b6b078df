//! Confirm mode: ask a person before each write or command.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use futures::future::BoxFuture;

/// Asked before each file-changing tool call and each command, with a description of what will
/// happen. Answering `false` refuses the call; the model is told that the user declined.
pub trait Confirm: Send + Sync {
    /// Whether the action described by `what` may go ahead.
    fn confirm<'a>(&'a self, what: &'a str) -> BoxFuture<'a, bool>;
}

/// Asks on the terminal: prints the description to stderr and reads `y`/`yes` (anything else is
/// "no") from stdin. When stdin is not a terminal it declines at once, so a run in CI or with piped
/// input never hangs waiting for an answer. Questions from concurrent runs are asked one at a time.
#[derive(Debug, Default)]
pub struct TerminalConfirm {
    lock: Arc<std::sync::Mutex<()>>,
}

impl TerminalConfirm {
    /// A confirmer that asks on this process's terminal (and declines when stdin is not one).
    pub fn new() -> Self {
        Self::default()
    }
}

impl Confirm for TerminalConfirm {
    fn confirm<'a>(&'a self, what: &'a str) -> BoxFuture<'a, bool> {
        let what = what.to_string();
        let lock = Arc::clone(&self.lock);
        Box::pin(async move {
            if !std::io::stdin().is_terminal() {
                tracing::warn!("confirm mode: stdin is not a terminal, declining: {what}");
                return false;
            }
            let asked = tokio::task::spawn_blocking(move || {
                let _guard = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                let mut err = std::io::stderr().lock();
                let _ = writeln!(err, "\n── tagloop wants to ──\n{what}");
                let _ = write!(err, "Allow? [y/N] ");
                let _ = err.flush();
                let mut line = String::new();
                match std::io::stdin().lock().read_line(&mut line) {
                    Ok(0) | Err(_) => false,
                    Ok(_) => is_yes(&line),
                }
            })
            .await;
            asked.unwrap_or(false)
        })
    }
}

/// Whether an answer means yes (`y`, `yes`, any case, surrounding spaces ignored).
pub fn is_yes(answer: &str) -> bool {
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// A confirmer that always gives the same answer (for tests and for `--yes`-style flags).
#[derive(Debug, Clone, Copy)]
pub struct FixedConfirm(pub bool);

impl Confirm for FixedConfirm {
    fn confirm<'a>(&'a self, what: &'a str) -> BoxFuture<'a, bool> {
        tracing::debug!(answer = self.0, "confirm: {what}");
        Box::pin(std::future::ready(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yes_answers() {
        assert!(is_yes("y\n"));
        assert!(is_yes(" YES "));
        assert!(!is_yes("n"));
        assert!(!is_yes(""));
        assert!(!is_yes("yep"));
    }
}
