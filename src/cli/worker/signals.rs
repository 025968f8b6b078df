//! Signals and waiting out a lost Redis: the two things that decide when the worker's loops wait
//! and when they stop.

use std::time::Duration;

use anyhow::Result;
use tokio::sync::watch;

use tagloop::queue::QueueError;

/// Exponential backoff for a lost Redis: 100 ms doubling to 5 s.
pub(super) struct Backoff(Duration);

impl Backoff {
    pub fn new() -> Backoff {
        Backoff(Duration::from_millis(100))
    }

    /// Sleep the current delay, then double it (up to 5 s).
    pub async fn wait(&mut self) {
        tokio::time::sleep(self.0).await;
        self.0 = (self.0 * 2).min(Duration::from_secs(5));
    }

    /// Redis answered: the next outage starts from 100 ms again.
    pub fn reset(&mut self) {
        self.0 = Duration::from_millis(100);
    }
}

/// Retry `op` while its error is transient (Redis not up yet), until a signal.
pub(super) async fn retry_until_ok<F, Fut>(signals: &watch::Receiver<u8>, op: F) -> Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), QueueError>>,
{
    let mut backoff = Backoff::new();
    let mut sig = signals.clone();
    loop {
        match op().await {
            Ok(()) => return Ok(()),
            Err(e) if e.is_transient() && *sig.borrow() == 0 => {
                tracing::warn!("{e}; trying again");
                tokio::select! {
                    _ = backoff.wait() => {}
                    _ = sig.changed() => {}
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The number of SIGTERM, SIGINT and SIGHUP received so far: 1 means "stop taking tasks", 2 or
/// more "hand the running ones back now".
pub(super) fn signal_count() -> watch::Receiver<u8> {
    use tokio::signal::unix::{SignalKind, signal};
    let (tx, rx) = watch::channel(0u8);
    tokio::spawn(async move {
        let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            tracing::warn!("cannot install signal handlers");
            return;
        };
        loop {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
                _ = hup.recv() => {}
            }
            tx.send_modify(|n| *n = n.saturating_add(1));
            eprintln!(
                "{}",
                if *tx.borrow() == 1 {
                    "signal received: taking no new tasks (a second signal hands the running ones back at once)"
                } else {
                    "second signal: handing running tasks back"
                }
            );
        }
    });
    rx
}
