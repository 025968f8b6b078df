//! What a worker does with the tasks it holds: store their results, keep them alive, hand them
//! back; and leaving the queue.

use serde_json::Value;

use super::scripts::HANDED_BACK_IDLE_MS;
use super::{GROUP, Queue, QueueError, now_ms};

impl Queue {
    /// Store a task's result (unless another worker stored one first) and settle its entry.
    /// Returns whether this result was the one stored.
    pub async fn store(
        &self,
        delivery_entry: &str,
        key: &str,
        line: &Value,
        ok: bool,
    ) -> Result<bool, QueueError> {
        let mut inv = self.scripts.store.prepare_invoke();
        inv.key(&self.keys.results)
            .key(&self.keys.failed)
            .key(&self.keys.tasks)
            .key(&self.keys.known)
            .arg(key)
            .arg(line.to_string())
            .arg(if ok { "0" } else { "1" })
            .arg(GROUP)
            .arg(delivery_entry);
        let won: u8 = self.script("storing a result", inv).await?;
        Ok(won == 1)
    }

    /// Whether a task already has a result.
    pub async fn has_result(&self, key: &str) -> Result<bool, QueueError> {
        let mut cmd = redis::cmd("HEXISTS");
        cmd.arg(&self.keys.results).arg(key);
        self.query("looking up a result", &cmd).await
    }

    /// Say the worker is alive and keep its running tasks from being claimed; `running` is
    /// `(entry, id)` pairs. Returns the entries whose task another worker has finished.
    pub async fn keep_alive(
        &self,
        worker: &str,
        running: &[(String, String)],
    ) -> Result<Vec<String>, QueueError> {
        let mut inv = self.scripts.keep.prepare_invoke();
        inv.key(&self.keys.tasks)
            .key(&self.keys.results)
            .key(&self.keys.workers)
            .arg(GROUP)
            .arg(worker)
            .arg(now_ms());
        for (entry, key) in running {
            inv.arg(entry).arg(key);
        }
        self.script("keeping running tasks", inv).await
    }

    /// The entries `worker` holds (delivered to it, not settled), oldest first, at most 100,000.
    pub async fn owned_by(&self, worker: &str) -> Result<Vec<String>, QueueError> {
        let mut cmd = redis::cmd("XPENDING");
        cmd.arg(&self.keys.tasks)
            .arg(GROUP)
            .arg("-")
            .arg("+")
            .arg(100_000)
            .arg(worker);
        let rows: Vec<(String, String, u64, u64)> =
            self.query("listing a worker's tasks", &cmd).await?;
        Ok(rows.into_iter().map(|r| r.0).collect())
    }

    /// Make entries this worker still owns claimable by other workers at once.
    pub async fn hand_back(&self, worker: &str, entries: &[String]) -> Result<(), QueueError> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut inv = self.scripts.hand_back.prepare_invoke();
        inv.key(&self.keys.tasks)
            .arg(GROUP)
            .arg(worker)
            .arg(HANDED_BACK_IDLE_MS);
        for e in entries {
            inv.arg(e);
        }
        self.script("handing tasks back", inv).await
    }

    /// Forget a worker that is leaving (its name, and its consumer once it owns nothing).
    pub async fn leave(&self, worker: &str) -> Result<(), QueueError> {
        let mut pipe = redis::pipe();
        pipe.cmd("HDEL")
            .arg(&self.keys.workers)
            .arg(worker)
            .ignore();
        self.pipe::<()>("leaving the queue", &pipe).await
    }
}
