//! `tagloop worker --queue URL`: take tasks from a shared Redis queue, run each as `batch` does,
//! store its result under its id.
//!
//! The worker's own options (model, tools, gates, sessions) apply to every task; a task brings
//! only its text, an inline role and context. Three parts run side by side:
//!
//! * the **taker** (`worker/taker.rs`) reads new tasks, and every `claim_after / 2` claims
//!   tasks that other workers left idle (they died), as slots free up; each task is computed by
//!   `worker/run.rs`;
//! * the **keeper** (`worker/keeper.rs`) says every `claim_after / 4` that the worker is alive
//!   and resets the idle time of the tasks it holds, so a slow task is never taken from a live
//!   worker; it also learns which of them another worker has already finished, and stops those;
//! * the **storer** (`worker/storer.rs`) stores each computed result and settles its entry,
//!   retrying while Redis is unreachable: a result is kept in memory until it is stored.
//!
//! On SIGTERM, SIGINT or SIGHUP the worker stops taking tasks and gives the running ones `--grace`
//! seconds to finish; the rest are stopped and handed back (claimable by other workers at once).
//! A second signal hands them back at once. The worker exits when every computed result is
//! stored; after a second signal with Redis still unreachable, the unstored results are written
//! to a local file rather than lost.

mod keeper;
mod run;
mod shared;
mod signals;
mod storer;
mod taker;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use tokio::sync::mpsc;

use tagloop::queue::Queue;

use super::batch::raise_fd_limit;
use super::options::RunOpts;
use super::queue::QueueArg;
use super::session_dir::SessionArgs;
use super::setup::Setup;
use super::usage::usage;
use run::Runner;
use shared::Shared;
use signals::{retry_until_ok, signal_count};
use taker::{Pace, Taker};

/// `tagloop worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub queue: QueueArg,
    /// Tasks run at once
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub concurrency: usize,
    /// Claim a task another worker has not kept alive for this many seconds (it died)
    #[arg(long, default_value_t = 300.0, value_name = "SECS")]
    pub claim_after: f64,
    /// Exit when nothing is queued or running
    #[arg(long)]
    pub until_empty: bool,
    /// After SIGTERM/SIGINT, seconds the running tasks may take to finish before they are handed back
    #[arg(long, default_value_t = 20.0, value_name = "SECS")]
    pub grace: f64,
    /// A task delivered this many times without a result (its workers kept dying) is stored as an error
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub max_deliveries: u64,
    /// This worker's name in the queue [default: HOST-PID-NNNNN]
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    #[command(flatten)]
    pub sessions: SessionArgs,
    #[command(flatten)]
    pub opts: RunOpts,
}

/// The flags checked, as durations and counts.
struct Limits {
    concurrency: usize,
    claim_after: Duration,
    grace: Duration,
    max_deliveries: u64,
}

impl Limits {
    /// Usage errors for flags that make no sense.
    fn check(args: &WorkerArgs) -> Result<Limits> {
        if args.concurrency == 0 {
            return Err(usage("--concurrency must be at least 1"));
        }
        let claim_after = seconds("--claim-after", args.claim_after, 0.1)?;
        let grace = seconds("--grace", args.grace, 0.0)?;
        if args.max_deliveries == 0 {
            return Err(usage("--max-deliveries must be at least 1"));
        }
        Ok(Limits {
            concurrency: args.concurrency,
            claim_after,
            grace,
            max_deliveries: args.max_deliveries,
        })
    }
}

fn seconds(flag: &str, v: f64, min: f64) -> Result<Duration> {
    if !v.is_finite() || v < min {
        return Err(usage(format!("{flag} must be a number of seconds ≥ {min}")));
    }
    Duration::try_from_secs_f64(v).map_err(|_| usage(format!("{flag} is too large: {v} seconds")))
}

/// The default worker name: host, process id and a few digits of the start time. A container
/// restarted in the same pod has the same host name and often the same pid (1), so the time
/// keeps a new worker from taking the name (and the pending tasks) of the one that died.
fn default_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".into());
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() % 100_000)
        .unwrap_or(0);
    format!("{host}-{}-{stamp:05}", std::process::id())
}

/// Run the worker until the queue is empty (`--until-empty`) or a signal stops it.
pub async fn worker(args: WorkerArgs) -> Result<ExitCode> {
    raise_fd_limit();
    let limits = Limits::check(&args)?;
    let url = args.queue.url()?;
    // The password is hidden from every task's tools and transcripts, like an API key.
    let secrets: Vec<String> = url
        .password()
        .map(|p| vec![p.expose().to_string()])
        .unwrap_or_default();
    let queue = Arc::new(Queue::new(url)?);
    let opts = args.opts.clone().absolutize();
    let setup = Arc::new(Setup::build_with_secrets(&opts, true, &secrets).await?);
    let shared = Shared {
        queue: queue.clone(),
        name: args.name.clone().unwrap_or_else(default_name),
        held: Arc::default(),
        tally: Arc::default(),
        signals: signal_count(),
    };
    retry_until_ok(&shared.signals, || queue.prepare()).await?;
    eprintln!(
        "worker {} on {}: up to {} tasks at once",
        shared.name,
        queue.shown(),
        limits.concurrency
    );
    let started = Instant::now();

    let keep_every =
        (limits.claim_after / 4).clamp(Duration::from_millis(100), Duration::from_secs(15));
    let keeper = tokio::spawn(keeper::keep_alive(shared.clone(), keep_every));
    let (to_store, stored_rx) = mpsc::unbounded_channel();
    let storer = tokio::spawn(storer::store_results(shared.clone(), stored_rx));
    let runner = Runner {
        setup: setup.clone(),
        session_dir: args.sessions.dir(),
        meta: setup.record(&opts),
        max_deliveries: limits.max_deliveries,
        queue: queue.clone(),
        tally: shared.tally.clone(),
    };
    let mut taker = Taker::new(
        shared.clone(),
        runner,
        Pace::new(limits.concurrency, limits.claim_after),
        args.until_empty,
        to_store,
    );
    let failure = taker.take_until_stopped().await.err();
    // Dropping the taker closes the storer's channel: the storer ends once all is stored.
    taker.finish_running(limits.grace).await;
    let spooled = storer.await.ok().flatten();
    hand_back_unfinished(&shared).await;
    keeper.abort();
    let _ = queue.leave(&shared.name).await;
    setup.shutdown().await;
    say_what_was_done(&shared, started);
    if let Some(e) = failure {
        return Err(e);
    }
    match spooled {
        Some(spool) => Err(anyhow::anyhow!(
            "Redis stayed unreachable: the results not stored are in {}",
            spool.display()
        )),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// Whatever this worker still owns was not finished (stopped, or read by a wait a signal
/// interrupted): hand it back so other workers take it at once.
async fn hand_back_unfinished(shared: &Shared) {
    let queue = &shared.queue;
    match queue.owned_by(&shared.name).await {
        Ok(entries) if !entries.is_empty() => match queue.hand_back(&shared.name, &entries).await {
            Ok(()) => {
                shared
                    .tally
                    .handed_back
                    .fetch_add(entries.len() as u64, Ordering::Relaxed);
            }
            Err(e) => tracing::warn!(
                "{e}: {} tasks not handed back; other workers claim them after their --claim-after",
                entries.len()
            ),
        },
        Ok(_) => {}
        Err(e) => tracing::warn!(
            "{e}: unfinished tasks not handed back; other workers claim them after their --claim-after"
        ),
    }
}

/// The worker's last line.
fn say_what_was_done(shared: &Shared, started: Instant) {
    let t = &shared.tally;
    eprintln!(
        "worker {}: {} tasks run ({} not ok), {} duplicate results dropped, {} handed back, in {:.1} s",
        shared.name,
        t.ran.load(Ordering::Relaxed),
        t.not_ok.load(Ordering::Relaxed),
        t.duplicates.load(Ordering::Relaxed),
        t.handed_back.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_refuse_what_a_duration_cannot_hold() {
        assert_eq!(
            seconds("--grace", 1.5, 0.0).unwrap(),
            Duration::from_millis(1500)
        );
        for bad in [f64::NAN, f64::INFINITY, -1.0, 1e30] {
            assert!(seconds("--grace", bad, 0.0).is_err(), "{bad}");
        }
    }
}
