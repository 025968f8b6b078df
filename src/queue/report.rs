//! Reading the queue as a whole: its counts and its stored results.

use std::collections::HashMap;

use serde_json::Value;

use super::{GROUP, Queue, QueueError, QueueStatus, WORKER_SEEN_WINDOW, now_ms};

/// A hash read as bytes, not text: any client can write the workers hash, and one field that is
/// not UTF-8 or not a number must not make the whole status (and `--until-empty`) fail.
type RawHash = Vec<(Vec<u8>, Vec<u8>)>;

impl Queue {
    /// The queue's counts.
    pub async fn status(&self) -> Result<QueueStatus, QueueError> {
        self.prepare().await?;
        let mut pipe = redis::pipe();
        pipe.cmd("HLEN").arg(&self.keys.known);
        pipe.cmd("HLEN").arg(&self.keys.results);
        pipe.cmd("SCARD").arg(&self.keys.failed);
        pipe.cmd("XPENDING").arg(&self.keys.tasks).arg(GROUP);
        pipe.cmd("HGETALL").arg(&self.keys.workers);
        let (known, stored, failed, pending, workers): (u64, u64, u64, redis::Value, RawHash) =
            self.pipe("reading the counts", &pipe).await?;
        let running = match &pending {
            redis::Value::Array(items) => items
                .first()
                .and_then(|v| redis::from_redis_value_ref::<u64>(v).ok())
                .unwrap_or(0),
            _ => 0,
        };
        let now = now_ms();
        let window = WORKER_SEEN_WINDOW.as_millis() as u64;
        let mut worker_names: Vec<String> = workers
            .into_iter()
            .filter(|(_, seen)| {
                let seen = std::str::from_utf8(seen).ok().and_then(|s| s.parse().ok());
                seen.is_some_and(|seen: u64| now.saturating_sub(seen) <= window)
            })
            .map(|(name, _)| String::from_utf8_lossy(&name).into_owned())
            .collect();
        worker_names.sort();
        let failed = failed.min(stored);
        Ok(QueueStatus {
            queued: known.saturating_sub(stored).saturating_sub(running),
            running,
            done: stored - failed,
            failed,
            workers: worker_names.len() as u64,
            worker_names,
        })
    }

    /// Every stored result line, in push order.
    pub async fn results(&self) -> Result<Vec<Value>, QueueError> {
        let mut pipe = redis::pipe();
        pipe.cmd("HGETALL").arg(&self.keys.known);
        pipe.cmd("HGETALL").arg(&self.keys.results);
        let (known, results): (HashMap<String, String>, HashMap<String, String>) =
            self.pipe("reading the results", &pipe).await?;
        let mut rows = Vec::with_capacity(results.len());
        for (key, line) in results {
            let value: Value = serde_json::from_str(&line).map_err(|e| QueueError::Data {
                queue: self.shown.clone(),
                detail: format!("the result of {key} is not JSON: {e}"),
            })?;
            let order = known
                .get(&key)
                .map(|e| entry_order(e))
                .unwrap_or((u64::MAX, 0));
            rows.push((order, key, value));
        }
        rows.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        Ok(rows.into_iter().map(|(_, _, v)| v).collect())
    }
}

/// A stream entry id (`MS-SEQ`) as a sortable pair.
fn entry_order(entry: &str) -> (u64, u64) {
    let (ms, seq) = entry.split_once('-').unwrap_or((entry, "0"));
    (ms.parse().unwrap_or(u64::MAX), seq.parse().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_sort_by_time_then_sequence() {
        let mut v = vec!["1700-2", "1700-10", "999-5"];
        v.sort_by_key(|e| entry_order(e));
        assert_eq!(v, ["999-5", "1700-2", "1700-10"]);
    }
}
