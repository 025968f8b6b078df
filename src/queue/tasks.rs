//! Putting tasks in and handing them to workers: push, take (new tasks), claim (tasks other
//! workers left idle).

use std::time::Duration;

use serde_json::Value;

use super::scripts::PUSH;
use super::{BadEntry, Delivery, GROUP, MAX_ENTRY_BYTES, PushReport, Queue, QueueError};

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
    ///
    /// Nothing is pushed when a task is larger than [`MAX_ENTRY_BYTES`] (workers would refuse
    /// it): [`QueueError::TaskTooLarge`] names the first.
    pub async fn push(&self, tasks: &[(String, Value)]) -> Result<PushReport, QueueError> {
        let lines: Vec<(&str, String)> = tasks
            .iter()
            .map(|(key, task)| (key.as_str(), task.to_string()))
            .collect();
        for (key, line) in &lines {
            // The entry's size as deliver.lua counts it: field names and values.
            let bytes = "id".len() + key.len() + "task".len() + line.len();
            if bytes > MAX_ENTRY_BYTES {
                return Err(QueueError::TaskTooLarge {
                    key: key.to_string(),
                    bytes,
                });
            }
        }
        self.prepare().await?;
        let mut report = PushReport::default();
        for chunk in lines.chunks(500) {
            let mut pipe = redis::pipe();
            for (key, line) in chunk {
                pipe.cmd("EVAL")
                    .arg(PUSH)
                    .arg(2)
                    .arg(&self.keys.known)
                    .arg(&self.keys.tasks)
                    .arg(*key)
                    .arg(line);
            }
            let added: Vec<u8> = self.pipe("pushing tasks", &pipe).await?;
            let n = added.iter().filter(|a| **a == 1).count() as u64;
            report.added += n;
            report.skipped += chunk.len() as u64 - n;
        }
        Ok(report)
    }

    /// Read up to `count` tasks no worker has taken yet, waiting up to `block` for one (`None`:
    /// not at all). While it waits it looks again every 100 ms (`TAKE_POLL`).
    ///
    /// Redis checks each entry before it is sent (see [`MAX_ENTRY_BYTES`]): an entry tagloop
    /// cannot run comes back as a [`Delivery`] whose `task` says why, never as an error, so that
    /// one bad entry cannot stop the worker. A read cancelled while it waits may still have given
    /// tasks to `worker` in Redis: they are found by [`Queue::owned_by`] and handed back, or
    /// claimed by others after `claim_after`.
    pub async fn take(
        &self,
        worker: &str,
        count: usize,
        block: Option<Duration>,
    ) -> Result<Vec<Delivery>, QueueError> {
        // Polling, not XREADGROUP BLOCK: a blocking read cannot run inside a script, and only a
        // script can look at an entry's size before the entry is sent to us.
        let deadline = block.map(|b| tokio::time::Instant::now() + b);
        loop {
            let (_, got) = self.deliver(worker, count, Sweep::New).await?;
            let now = tokio::time::Instant::now();
            match deadline {
                Some(deadline) if got.is_empty() && now < deadline => {
                    tokio::time::sleep(TAKE_POLL.min(deadline - now)).await;
                }
                _ => return Ok(got),
            }
        }
    }

    /// Claim up to `count` tasks that other workers took and left idle for `min_idle` (the worker
    /// died, or handed them back). Bad entries come back as [`Queue::take`] says.
    pub async fn claim(
        &self,
        worker: &str,
        min_idle: Duration,
        count: usize,
    ) -> Result<Vec<Delivery>, QueueError> {
        let mut out = Vec::new();
        let mut start = "0-0".to_string();
        // A bounded sweep: the cursor comes back to 0-0 after one pass over the pending list.
        for _ in 0..16 {
            let sweep = Sweep::Claim {
                min_idle,
                start: &start,
            };
            let (next, got) = self.deliver(worker, count - out.len(), sweep).await?;
            out.extend(got);
            start = next;
            if start == "0-0" || out.len() >= count {
                break;
            }
        }
        Ok(out)
    }

    /// Run `deliver.lua` once: `(the next claim cursor, the deliveries)`.
    async fn deliver(
        &self,
        worker: &str,
        count: usize,
        sweep: Sweep<'_>,
    ) -> Result<(String, Vec<Delivery>), QueueError> {
        let mut inv = self.scripts.deliver.prepare_invoke();
        inv.key(&self.keys.tasks)
            .arg(GROUP)
            .arg(worker)
            .arg(count.max(1))
            .arg(MAX_ENTRY_BYTES);
        let what = match sweep {
            Sweep::New => {
                inv.arg("new");
                "reading new tasks"
            }
            Sweep::Claim { min_idle, start } => {
                inv.arg("claim").arg(min_idle.as_millis() as u64).arg(start);
                "claiming abandoned tasks"
            }
        };
        let (next, rows): (String, Vec<Described>) = self.script(what, inv).await?;
        Ok((next, rows.into_iter().map(delivery).collect()))
    }
}

/// How often [`Queue::take`] looks again while it waits for a task.
pub const TAKE_POLL: Duration = Duration::from_millis(100);

/// Which entries `deliver.lua` hands out.
enum Sweep<'a> {
    /// Entries no worker has taken yet.
    New,
    /// Entries idle for `min_idle`, from the cursor `start`.
    Claim { min_idle: Duration, start: &'a str },
}

/// One entry as `deliver.lua` describes it: entry id, deliveries, the `id` and `task` fields
/// (as bytes: anyone may write anything there), and the entry's size.
type Described = (String, u64, Option<Vec<u8>>, Option<Vec<u8>>, u64);

/// A delivery from its description. An entry that is not a task keeps its problem in `task`,
/// and its stream entry id stands in for an id it does not have.
fn delivery((entry, deliveries, id, task, bytes): Described) -> Delivery {
    let id = match id.map(String::from_utf8) {
        Some(Ok(key)) => Ok(key),
        Some(Err(_)) => Err(BadEntry::IdNotText),
        None => Err(BadEntry::NoId),
    };
    let (key, id_problem) = match id {
        Ok(key) => (key, None),
        Err(e) => (entry.clone(), Some(e)),
    };
    let task = if bytes > MAX_ENTRY_BYTES as u64 {
        Err(BadEntry::TooLarge {
            bytes,
            limit: MAX_ENTRY_BYTES,
        })
    } else if let Some(problem) = id_problem {
        Err(problem)
    } else {
        match task {
            None => Err(BadEntry::NoTask),
            Some(text) => {
                serde_json::from_slice(&text).map_err(|e| BadEntry::NotJson(e.to_string()))
            }
        }
    };
    Delivery {
        entry,
        key,
        task,
        deliveries,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: Option<&[u8]>, task: Option<&[u8]>, bytes: u64) -> Described {
        (
            "7-0".into(),
            1,
            id.map(<[u8]>::to_vec),
            task.map(<[u8]>::to_vec),
            bytes,
        )
    }

    #[test]
    fn an_entry_that_is_not_a_task_says_why_under_the_best_key_it_has() {
        let d = delivery(row(Some(b"a"), Some(br#"{"id":"a"}"#), 20));
        assert_eq!(
            (d.key.as_str(), d.task),
            ("a", Ok(serde_json::json!({"id": "a"})))
        );
        type Case = (Described, &'static str, fn(&BadEntry) -> bool);
        let cases: [Case; 5] = [
            (row(Some(b"a"), Some(b"{x"), 9), "a", |e| {
                matches!(e, BadEntry::NotJson(_))
            }),
            (row(Some(b"a"), None, 3), "a", |e| *e == BadEntry::NoTask),
            (row(None, Some(b"{}"), 6), "7-0", |e| *e == BadEntry::NoId),
            (row(Some(b"\xff"), Some(b"{}"), 7), "7-0", |e| {
                *e == BadEntry::IdNotText
            }),
            (
                row(Some(b"a"), None, MAX_ENTRY_BYTES as u64 + 1),
                "a",
                |e| matches!(e, BadEntry::TooLarge { .. }),
            ),
        ];
        for (row, key, is) in cases {
            let d = delivery(row);
            assert_eq!(d.key, key);
            assert!(is(d.task.as_ref().unwrap_err()), "{:?}", d.task);
        }
    }
}
