//! Putting tasks in and handing them to workers: push, take (new tasks), claim (tasks other
//! workers left idle).

use std::collections::HashMap;
use std::time::Duration;

use redis::streams::{StreamAutoClaimReply, StreamReadReply};
use serde_json::Value;

use super::connection::Line;
use super::scripts::PUSH;
use super::{Delivery, GROUP, PushReport, Queue, QueueError};

impl Queue {
    /// Create the stream and its consumer group if they are not there (safe to repeat).
    pub async fn prepare(&self) -> Result<(), QueueError> {
        let mut cmd = redis::cmd("XGROUP");
        cmd.arg("CREATE")
            .arg(&self.keys.tasks)
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM");
        match self.query::<()>("creating the consumer group", &cmd).await {
            Ok(()) => Ok(()),
            Err(QueueError::Redis { source, .. }) if source.code() == Some("BUSYGROUP") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Push tasks, `(id as text, task line)` each; ids the queue already knows are skipped.
    pub async fn push(&self, tasks: &[(String, Value)]) -> Result<PushReport, QueueError> {
        self.prepare().await?;
        let mut report = PushReport::default();
        for chunk in tasks.chunks(500) {
            let mut pipe = redis::pipe();
            for (key, task) in chunk {
                pipe.cmd("EVAL")
                    .arg(PUSH)
                    .arg(2)
                    .arg(&self.keys.known)
                    .arg(&self.keys.tasks)
                    .arg(key)
                    .arg(task.to_string());
            }
            let added: Vec<u8> = self.pipe("pushing tasks", &pipe).await?;
            let n = added.iter().filter(|a| **a == 1).count() as u64;
            report.added += n;
            report.skipped += chunk.len() as u64 - n;
        }
        Ok(report)
    }

    /// Read up to `count` tasks no worker has taken yet, waiting up to `block` for one (`None`:
    /// not at all).
    ///
    /// A read cancelled while it waits may still have given tasks to `worker` in Redis: they are
    /// found by [`Queue::owned_by`] and handed back, or claimed by others after `claim_after`.
    pub async fn take(
        &self,
        worker: &str,
        count: usize,
        block: Option<Duration>,
    ) -> Result<Vec<Delivery>, QueueError> {
        const WHAT: &str = "reading new tasks";
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(GROUP)
            .arg(worker)
            .arg("COUNT")
            .arg(count.max(1));
        if let Some(block) = block {
            cmd.arg("BLOCK").arg(block.as_millis().max(1) as u64);
        }
        cmd.arg("STREAMS").arg(&self.keys.tasks).arg(">");
        let mut c = self.connection(Line::Reader, WHAT).await?;
        let reply: Option<StreamReadReply> = match cmd.query_async(&mut c).await {
            Ok(v) => v,
            Err(e) => return Err(self.failed(Line::Reader, e, WHAT).await),
        };
        let mut out = Vec::new();
        for key in reply.map(|r| r.keys).unwrap_or_default() {
            for entry in key.ids {
                out.push(self.delivery(&entry.id, &entry.map, 1)?);
            }
        }
        Ok(out)
    }

    fn delivery(
        &self,
        entry: &str,
        map: &HashMap<String, redis::Value>,
        deliveries: u64,
    ) -> Result<Delivery, QueueError> {
        let field = |name: &str| -> Option<String> {
            map.get(name)
                .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
        };
        let bad = |detail: String| QueueError::Data {
            queue: self.shown.clone(),
            detail,
        };
        let key = field("id").ok_or_else(|| bad(format!("entry {entry} has no id field")))?;
        let text = field("task").ok_or_else(|| bad(format!("entry {entry} has no task field")))?;
        let task = serde_json::from_str(&text).map_err(|e| {
            bad(format!(
                "entry {entry} (task {key}): the task is not JSON: {e}"
            ))
        })?;
        Ok(Delivery {
            entry: entry.to_string(),
            key,
            task,
            deliveries,
        })
    }

    /// Claim up to `count` tasks that other workers took and left idle for `min_idle` (the worker
    /// died, or handed them back).
    pub async fn claim(
        &self,
        worker: &str,
        min_idle: Duration,
        count: usize,
    ) -> Result<Vec<Delivery>, QueueError> {
        const WHAT: &str = "claiming abandoned tasks";
        let mut out = Vec::new();
        let mut start = "0-0".to_string();
        // A bounded sweep: the cursor comes back to 0-0 after one pass over the pending list.
        for _ in 0..16 {
            let mut cmd = redis::cmd("XAUTOCLAIM");
            cmd.arg(&self.keys.tasks)
                .arg(GROUP)
                .arg(worker)
                .arg(min_idle.as_millis() as u64)
                .arg(&start)
                .arg("COUNT")
                .arg((count - out.len()).max(1));
            let reply: StreamAutoClaimReply = self.query(WHAT, &cmd).await?;
            for entry in &reply.claimed {
                let deliveries = self.deliveries(&entry.id).await?;
                out.push(self.delivery(&entry.id, &entry.map, deliveries)?);
            }
            start = reply.next_stream_id;
            if start == "0-0" || out.len() >= count {
                break;
            }
        }
        Ok(out)
    }

    /// How many times an entry was delivered (from the pending list).
    async fn deliveries(&self, entry: &str) -> Result<u64, QueueError> {
        let mut cmd = redis::cmd("XPENDING");
        cmd.arg(&self.keys.tasks)
            .arg(GROUP)
            .arg(entry)
            .arg(entry)
            .arg(1);
        let rows: Vec<(String, String, u64, u64)> =
            self.query("reading a delivery count", &cmd).await?;
        Ok(rows.first().map(|r| r.3).unwrap_or(1))
    }
}
