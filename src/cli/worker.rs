//! `tagloop worker --queue URL`: take tasks from a shared Redis queue, run each as `batch` does,
//! store its result under its id.
//!
//! The worker's own options (model, tools, gates, sessions) apply to every task; a task brings
//! only its text, an inline role and context. Three parts run side by side:
//!
//! * the **taker** (this function's loop) reads new tasks, and every `claim_after / 2` claims tasks
//!   that other workers left idle (they died), as slots free up;
//! * the **keeper** says every `claim_after / 4` that the worker is alive and resets the idle time
//!   of the tasks it holds, so a slow task is never taken from a live worker; it also learns which
//!   of them another worker has already finished, and stops those;
//! * the **storer** stores each computed result and settles its entry, retrying while Redis is
//!   unreachable: a result is kept in memory until it is stored.
//!
//! On SIGTERM, SIGINT or SIGHUP the worker stops taking tasks and gives the running ones `--grace`
//! seconds to finish; the rest are stopped and handed back (claimable by other workers at once).
//! A second signal hands them back at once. The worker exits when every computed result is
//! stored; after a second signal with Redis still unreachable, the unstored results are written
//! to a local file rather than lost.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use serde_json::{Value, json};
use tokio::sync::{Mutex, mpsc, watch};
use tokio::task::{AbortHandle, JoinSet};

use tagloop::agent::Status;
use tagloop::queue::{Delivery, Queue, QueueError};

use super::batch::{parse_task, raise_fd_limit, run_one};
use super::options::{RunOpts, SessionArgs, usage};
use super::queue::QueueArg;
use super::setup::Setup;

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

/// A task this worker holds: computing, or computed and waiting to be stored.
struct Held {
    key: String,
    abort: Option<AbortHandle>,
}

/// A computed result on its way to Redis.
struct Computed {
    entry: String,
    key: String,
    line: Value,
    ok: bool,
}

/// What the worker did, for its last line.
#[derive(Default)]
struct Tally {
    ran: AtomicU64,
    not_ok: AtomicU64,
    duplicates: AtomicU64,
    handed_back: AtomicU64,
}

/// Exponential backoff for a lost Redis: 100 ms doubling to 5 s.
struct Backoff(Duration);

impl Backoff {
    fn new() -> Backoff {
        Backoff(Duration::from_millis(100))
    }

    async fn wait(&mut self) {
        tokio::time::sleep(self.0).await;
        self.0 = (self.0 * 2).min(Duration::from_secs(5));
    }

    fn reset(&mut self) {
        self.0 = Duration::from_millis(100);
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
    if args.concurrency == 0 {
        return Err(usage("--concurrency must be at least 1"));
    }
    let claim_after = seconds("--claim-after", args.claim_after, 0.1)?;
    let grace = seconds("--grace", args.grace, 0.0)?;
    if args.max_deliveries == 0 {
        return Err(usage("--max-deliveries must be at least 1"));
    }
    let url = args.queue.url()?;
    let secrets: Vec<String> = url
        .password()
        .map(|p| vec![p.expose().to_string()])
        .unwrap_or_default();
    let queue = Arc::new(Queue::new(url)?);
    let opts = args.opts.clone().absolutize();
    let setup = Arc::new(Setup::build_with_secrets(&opts, true, &secrets).await?);
    let meta = setup.record(&opts);
    let session_dir = args.sessions.dir();
    let name = args.name.clone().unwrap_or_else(default_name);
    let signals = signal_count();
    retry_until_ok(&signals, || queue.prepare()).await?;
    eprintln!(
        "worker {name} on {}: up to {} tasks at once",
        queue.shown(),
        args.concurrency
    );

    let held: Arc<Mutex<HashMap<String, Held>>> = Arc::default();
    let tally = Arc::new(Tally::default());
    let keep_every = (claim_after / 4).clamp(Duration::from_millis(100), Duration::from_secs(15));
    let keeper = tokio::spawn(keep_alive(
        queue.clone(),
        name.clone(),
        held.clone(),
        keep_every,
    ));
    let (to_store, stored_rx) = mpsc::unbounded_channel::<Computed>();
    let storer = tokio::spawn(store_results(
        queue.clone(),
        stored_rx,
        held.clone(),
        tally.clone(),
        signals.clone(),
        name.clone(),
    ));

    let started = Instant::now();
    let claim_every = (claim_after / 2).clamp(Duration::from_millis(100), Duration::from_secs(60));
    let block = claim_every.min(Duration::from_secs(1));
    let poll = block.min(Duration::from_millis(200));
    let mut last_claim: Option<Instant> = None;
    let mut running: JoinSet<Option<Computed>> = JoinSet::new();
    let mut backoff = Backoff::new();
    let mut sig = signals.clone();
    let mut failure: Option<anyhow::Error> = None;

    while *sig.borrow() == 0 {
        while let Some(done) = running.try_join_next() {
            forward(done, &to_store);
        }
        let free = args.concurrency - running.len();
        if free == 0 {
            tokio::select! {
                Some(done) = running.join_next() => forward(done, &to_store),
                _ = sig.changed() => {}
            }
            continue;
        }
        let claim_due = last_claim.is_none_or(|t| t.elapsed() >= claim_every);
        let got = if claim_due {
            last_claim = Some(Instant::now());
            queue.claim(&name, claim_after, free).await
        } else {
            Ok(Vec::new())
        };
        let got = match got {
            Ok(v) if !v.is_empty() => Ok(v),
            // Nothing running or being stored: wait in Redis for a task (a signal interrupts the
            // wait).
            Ok(_) if running.is_empty() && held.lock().await.is_empty() => tokio::select! {
                r = queue.take(&name, free, Some(block)) => r,
                _ = sig.changed() => Ok(Vec::new()),
            },
            // Tasks running: look without waiting, then wait for one of them or a short while,
            // so a freed slot is filled at once (and `--until-empty` ends soon after the last
            // result is stored).
            Ok(_) => match queue.take(&name, free, None).await {
                Ok(v) if v.is_empty() => {
                    tokio::select! {
                        Some(done) = running.join_next() => forward(done, &to_store),
                        _ = tokio::time::sleep(poll) => {}
                        _ = sig.changed() => {}
                    }
                    Ok(v)
                }
                other => other,
            },
            Err(e) => Err(e),
        };
        let got = match got {
            Ok(v) => {
                backoff.reset();
                v
            }
            Err(e) if e.is_transient() => {
                tracing::warn!("{e}; trying again");
                tokio::select! {
                    _ = backoff.wait() => {}
                    _ = sig.changed() => {}
                }
                continue;
            }
            Err(e) => {
                failure = Some(e.into());
                break;
            }
        };
        if got.is_empty() {
            if args.until_empty && running.is_empty() && held.lock().await.is_empty() {
                match queue.status().await {
                    Ok(s) if s.is_settled() => break,
                    Ok(_) => {}
                    Err(e) if e.is_transient() => tracing::warn!("{e}; trying again"),
                    Err(e) => {
                        failure = Some(e.into());
                        break;
                    }
                }
            }
            continue;
        }
        // Held before its task can finish: results reach the storer only through this loop.
        let mut held_now = held.lock().await;
        for d in got {
            let entry = d.entry.clone();
            let key = d.key.clone();
            let abort = running.spawn(run_delivery(
                d,
                setup.clone(),
                session_dir.clone(),
                meta.clone(),
                args.max_deliveries,
                queue.clone(),
                tally.clone(),
            ));
            held_now.insert(
                entry,
                Held {
                    key,
                    abort: Some(abort),
                },
            );
        }
    }

    // Stopping: no new tasks. Running ones get the grace period (none after a second signal).
    if *sig.borrow() > 0 && !running.is_empty() {
        eprintln!(
            "worker {name}: stopping; {} running tasks get {:.0} s to finish",
            running.len(),
            grace.as_secs_f64()
        );
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            if running.is_empty() || *sig.borrow() > 1 {
                break;
            }
            tokio::select! {
                Some(done) = running.join_next() => forward(done, &to_store),
                _ = tokio::time::sleep_until(deadline) => break,
                _ = sig.changed() => {}
            }
        }
    }
    running.abort_all();
    while let Some(done) = running.join_next().await {
        forward(done, &to_store);
    }
    drop(to_store);
    let stored = storer.await;
    // Whatever this worker still owns was not finished (stopped, or read by a wait a signal
    // interrupted): hand it back so other workers take it at once.
    match queue.owned_by(&name).await {
        Ok(entries) if !entries.is_empty() => match queue.hand_back(&name, &entries).await {
            Ok(()) => {
                tally
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
    keeper.abort();
    let _ = queue.leave(&name).await;
    setup.shutdown().await;
    eprintln!(
        "worker {name}: {} tasks run ({} not ok), {} duplicate results dropped, {} handed back, in {:.1} s",
        tally.ran.load(Ordering::Relaxed),
        tally.not_ok.load(Ordering::Relaxed),
        tally.duplicates.load(Ordering::Relaxed),
        tally.handed_back.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    if let Some(e) = failure {
        return Err(e);
    }
    match stored {
        Ok(Some(spool)) => Err(anyhow::anyhow!(
            "Redis stayed unreachable: the results not stored are in {}",
            spool.display()
        )),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// Pass a finished task's result to the storer (aborted tasks have none).
fn forward(
    done: Result<Option<Computed>, tokio::task::JoinError>,
    to_store: &mpsc::UnboundedSender<Computed>,
) {
    match done {
        Ok(Some(c)) => {
            let _ = to_store.send(c);
        }
        Ok(None) => {}
        Err(e) if e.is_cancelled() => {}
        Err(e) => tracing::error!("a task panicked: {e}"),
    }
}

/// An error outcome in `batch`'s shape, for a task the worker cannot run.
fn error_line(id: &Value, error: String) -> Value {
    json!({"id": id, "status": "error", "final": null, "steps": 0, "llm_calls": 0, "tools_used": [],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0}, "session": null, "error": error})
}

/// Compute one delivery's result. `None` when there is nothing to store: the task already has a
/// result (its entry is settled here).
async fn run_delivery(
    d: Delivery,
    setup: Arc<Setup>,
    session_dir: Option<PathBuf>,
    meta: Value,
    max_deliveries: u64,
    queue: Arc<Queue>,
    tally: Arc<Tally>,
) -> Option<Computed> {
    let id = d
        .task
        .get("id")
        .cloned()
        .unwrap_or(Value::String(d.key.clone()));
    if matches!(queue.has_result(&d.key).await, Ok(true)) {
        // Finished by another worker whose acknowledgement was lost: settle the entry only.
        return Some(Computed {
            entry: d.entry,
            key: d.key,
            line: Value::Null,
            ok: true,
        });
    }
    let (ok, line) = if d.deliveries > max_deliveries {
        let e = format!(
            "given to workers {} times without a result (each stopped or died while running it); \
             not tried again (--max-deliveries {max_deliveries})",
            d.deliveries
        );
        (false, error_line(&id, e))
    } else {
        match parse_task(d.task, None) {
            Err(e) => (false, error_line(&id, format!("bad task: {e:#}"))),
            Ok(task) => {
                // A panic in one task (a bug) becomes that task's error result: otherwise its
                // entry would stay held and `--until-empty` would never see the queue settle.
                let run = std::panic::AssertUnwindSafe(run_one(
                    &setup,
                    task,
                    session_dir.as_deref(),
                    meta,
                ));
                match futures::FutureExt::catch_unwind(run).await {
                    Ok(Ok((status, _, line))) => (status == Status::Ok, line),
                    Ok(Err(e)) => (false, error_line(&id, format!("{e:#}"))),
                    Err(_) => (
                        false,
                        error_line(&id, "tagloop panicked while running this task".into()),
                    ),
                }
            }
        }
    };
    tally.ran.fetch_add(1, Ordering::Relaxed);
    if !ok {
        tally.not_ok.fetch_add(1, Ordering::Relaxed);
    }
    Some(Computed {
        entry: d.entry,
        key: d.key,
        line,
        ok,
    })
}

/// Store computed results in order, each until Redis takes it. Returns the file the unstored
/// results went to when a second signal ended the wait.
async fn store_results(
    queue: Arc<Queue>,
    mut rx: mpsc::UnboundedReceiver<Computed>,
    held: Arc<Mutex<HashMap<String, Held>>>,
    tally: Arc<Tally>,
    mut signals: watch::Receiver<u8>,
    name: String,
) -> Option<PathBuf> {
    let mut backoff = Backoff::new();
    while let Some(c) = rx.recv().await {
        if let Some(h) = held.lock().await.get_mut(&c.entry) {
            h.abort = None; // computed: nothing to stop or hand back
        }
        loop {
            match queue.store(&c.entry, &c.key, &c.line, c.ok).await {
                Ok(won) => {
                    if !won && !c.line.is_null() {
                        tally.duplicates.fetch_add(1, Ordering::Relaxed);
                        tracing::info!("task {}: another worker's result was stored first", c.key);
                    }
                    held.lock().await.remove(&c.entry);
                    backoff.reset();
                    break;
                }
                Err(e) => {
                    if *signals.borrow() > 1 {
                        let mut rest = vec![c];
                        while let Ok(more) = rx.try_recv() {
                            rest.push(more);
                        }
                        return spool(&name, &rest);
                    }
                    if e.is_transient() {
                        tracing::warn!(
                            "{e}; the result of task {} is kept and stored when Redis is back",
                            c.key
                        );
                    } else {
                        tracing::error!("{e}; storing the result of task {} again", c.key);
                    }
                    tokio::select! {
                        _ = backoff.wait() => {}
                        _ = signals.changed() => {}
                    }
                }
            }
        }
    }
    None
}

/// Write results Redis never took to `tagloop-unstored-NAME.jsonl` (appended) in the current
/// folder.
fn spool(name: &str, rest: &[Computed]) -> Option<PathBuf> {
    let path = PathBuf::from(format!("tagloop-unstored-{name}.jsonl"));
    let mut text = String::new();
    for c in rest.iter().filter(|c| !c.line.is_null()) {
        text.push_str(&c.line.to_string());
        text.push('\n');
    }
    use std::io::Write;
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()));
    match written {
        Ok(()) => Some(std::path::absolute(&path).unwrap_or(path)),
        Err(e) => {
            eprintln!(
                "cannot write {}: {e}; lost results:\n{text}",
                path.display()
            );
            Some(path)
        }
    }
}

/// Every `every`: say the worker is alive, keep its tasks from being claimed, and stop the ones
/// another worker has finished.
async fn keep_alive(
    queue: Arc<Queue>,
    name: String,
    held: Arc<Mutex<HashMap<String, Held>>>,
    every: Duration,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let pairs: Vec<(String, String)> = held
            .lock()
            .await
            .iter()
            .map(|(e, h)| (e.clone(), h.key.clone()))
            .collect();
        match queue.keep_alive(&name, &pairs).await {
            Ok(settled) => {
                let mut held = held.lock().await;
                for entry in settled {
                    if let Some(h) = held.get_mut(&entry)
                        && let Some(abort) = h.abort.take()
                    {
                        tracing::info!("task {}: finished by another worker; stopped here", h.key);
                        abort.abort();
                        held.remove(&entry);
                    }
                }
            }
            Err(e) => tracing::warn!("{e}"),
        }
    }
}

/// Retry `op` while its error is transient (Redis not up yet), until a signal.
async fn retry_until_ok<F, Fut>(signals: &watch::Receiver<u8>, op: F) -> Result<()>
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

/// The number of SIGTERM, SIGINT and SIGHUP received so far.
fn signal_count() -> watch::Receiver<u8> {
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
