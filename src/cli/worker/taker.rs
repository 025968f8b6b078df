//! The taker: fills free slots with new tasks, and every `claim_after / 2` with tasks other
//! workers left idle (they died); on a signal it gives the running tasks their grace period.

use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use tagloop::queue::{Delivery, QueueError};

use super::run::Runner;
use super::shared::{Held, Shared};
use super::signals::Backoff;
use super::storer::Computed;

/// How the taker paces itself, from `--concurrency` and `--claim-after`.
pub(super) struct Pace {
    /// Tasks run at once.
    pub concurrency: usize,
    /// How long a task must be idle before it is claimed from another worker.
    pub claim_after: Duration,
    /// How often abandoned tasks are looked for.
    pub claim_every: Duration,
    /// How long one read waits in Redis when the worker has nothing to do.
    pub block: Duration,
    /// How long to wait before looking again while tasks run.
    pub poll: Duration,
}

impl Pace {
    pub fn new(concurrency: usize, claim_after: Duration) -> Pace {
        let claim_every =
            (claim_after / 2).clamp(Duration::from_millis(100), Duration::from_secs(60));
        let block = claim_every.min(Duration::from_secs(1));
        Pace {
            concurrency,
            claim_after,
            claim_every,
            block,
            poll: block.min(Duration::from_millis(200)),
        }
    }
}

/// The taking loop's state: the tasks running here and where their results go.
pub(super) struct Taker {
    shared: Shared,
    runner: Runner,
    pace: Pace,
    until_empty: bool,
    last_claim: Option<Instant>,
    running: JoinSet<Option<Computed>>,
    to_store: mpsc::UnboundedSender<Computed>,
    sig: watch::Receiver<u8>,
}

impl Taker {
    pub fn new(
        shared: Shared,
        runner: Runner,
        pace: Pace,
        until_empty: bool,
        to_store: mpsc::UnboundedSender<Computed>,
    ) -> Taker {
        Taker {
            sig: shared.signals.clone(),
            shared,
            runner,
            pace,
            until_empty,
            last_claim: None,
            running: JoinSet::new(),
            to_store,
        }
    }

    /// Take and run tasks until a signal, until the queue is settled (`--until-empty`), or until
    /// Redis gives an error that waiting will not cure (returned).
    pub async fn take_until_stopped(&mut self) -> Result<()> {
        let mut backoff = Backoff::new();
        while *self.sig.borrow() == 0 {
            while let Some(done) = self.running.try_join_next() {
                forward(done, &self.to_store);
            }
            let free = self.pace.concurrency - self.running.len();
            if free == 0 {
                tokio::select! {
                    Some(done) = self.running.join_next() => forward(done, &self.to_store),
                    _ = self.sig.changed() => {}
                }
                continue;
            }
            let got = match self.next_tasks(free).await {
                Ok(v) => {
                    backoff.reset();
                    v
                }
                Err(e) if e.is_transient() => {
                    tracing::warn!("{e}; trying again");
                    tokio::select! {
                        _ = backoff.wait() => {}
                        _ = self.sig.changed() => {}
                    }
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            if got.is_empty() {
                if self.until_empty && self.idle().await && self.queue_is_settled().await? {
                    break;
                }
                continue;
            }
            self.start(got).await;
        }
        Ok(())
    }

    /// Up to `free` tasks: claimed ones when a claim is due and finds some, else new ones.
    async fn next_tasks(&mut self, free: usize) -> Result<Vec<Delivery>, QueueError> {
        let queue = &self.shared.queue;
        let name = &self.shared.name;
        if self
            .last_claim
            .is_none_or(|t| t.elapsed() >= self.pace.claim_every)
        {
            self.last_claim = Some(Instant::now());
            let claimed = queue.claim(name, self.pace.claim_after, free).await?;
            if !claimed.is_empty() {
                return Ok(claimed);
            }
        }
        if self.running.is_empty() && self.shared.held.lock().await.is_empty() {
            // Nothing running or being stored: wait in Redis for a task (a signal interrupts
            // the wait).
            return tokio::select! {
                r = queue.take(name, free, Some(self.pace.block)) => r,
                _ = self.sig.changed() => Ok(Vec::new()),
            };
        }
        // Tasks running: look without waiting, then wait for one of them or a short while, so
        // a freed slot is filled at once (and `--until-empty` ends soon after the last result
        // is stored).
        let got = queue.take(name, free, None).await?;
        if got.is_empty() {
            tokio::select! {
                Some(done) = self.running.join_next() => forward(done, &self.to_store),
                _ = tokio::time::sleep(self.pace.poll) => {}
                _ = self.sig.changed() => {}
            }
        }
        Ok(got)
    }

    /// Nothing running here and no result waiting to be stored.
    async fn idle(&self) -> bool {
        self.running.is_empty() && self.shared.held.lock().await.is_empty()
    }

    /// Whether nothing is queued or running anywhere; a transient error counts as "not yet".
    async fn queue_is_settled(&self) -> Result<bool> {
        match self.shared.queue.status().await {
            Ok(s) => Ok(s.is_settled()),
            Err(e) if e.is_transient() => {
                tracing::warn!("{e}; trying again");
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Start running `got`. Each is held before its task can finish: results reach the storer
    /// only through this loop, which then finds them held.
    async fn start(&mut self, got: Vec<Delivery>) {
        let mut held = self.shared.held.lock().await;
        for d in got {
            let entry = d.entry.clone();
            let key = d.key.clone();
            let abort = self.running.spawn(self.runner.clone().run(d));
            held.insert(
                entry,
                Held {
                    key,
                    abort: Some(abort),
                },
            );
        }
    }

    /// Stopping: no new tasks. Running ones get `grace` to finish (none after a second signal);
    /// the rest are stopped. Every computed result is passed on, then the storer's channel is
    /// closed so it ends when they are stored.
    pub async fn finish_running(mut self, grace: Duration) {
        if *self.sig.borrow() > 0 && !self.running.is_empty() {
            eprintln!(
                "worker {}: stopping; {} running tasks get {:.0} s to finish",
                self.shared.name,
                self.running.len(),
                grace.as_secs_f64()
            );
            let deadline = tokio::time::Instant::now() + grace;
            while !self.running.is_empty() && *self.sig.borrow() <= 1 {
                tokio::select! {
                    Some(done) = self.running.join_next() => forward(done, &self.to_store),
                    _ = tokio::time::sleep_until(deadline) => break,
                    _ = self.sig.changed() => {}
                }
            }
        }
        self.running.abort_all();
        while let Some(done) = self.running.join_next().await {
            forward(done, &self.to_store);
        }
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
