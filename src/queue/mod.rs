//! A durable task queue on Redis Streams, shared by `tagloop queue` and `tagloop worker`.
//!
//! # Layout
//!
//! A queue named `NAME` is five keys with one hash tag, so a Redis Cluster keeps them together:
//!
//! | key | type | holds |
//! |---|---|---|
//! | `tagloop:{NAME}:tasks` | stream, consumer group `workers` | one entry per queued task: `id`, `task` (the JSON line) |
//! | `tagloop:{NAME}:known` | hash | every id ever pushed → its stream entry id (push order) |
//! | `tagloop:{NAME}:results` | hash | id → the result line, as `batch` writes it |
//! | `tagloop:{NAME}:failed` | set | ids whose stored result is not `ok` |
//! | `tagloop:{NAME}:workers` | hash | worker name → when it was last seen (ms since the epoch) |
//!
//! # Guarantees
//!
//! * **Once per id on push**: pushing checks `known` and adds to the stream in one script, so a
//!   re-push (or two pushers racing) adds nothing for an id already queued, running or done.
//! * **At-least-once delivery**: a task read by a worker stays pending in the group until its
//!   result is stored. A worker keeps the tasks it runs alive (their idle time is reset every few
//!   seconds); a task whose worker stopped doing so for `claim_after` is claimed by another worker
//!   with `XAUTOCLAIM`.
//! * **Exactly one result per id**: the result is stored with `HSETNX` and the entry acknowledged
//!   and deleted in the same script; when two workers finish one task, the first stored wins and
//!   the second is dropped.
//!
//! Counts: `queued + running + done + failed` is the number of ids pushed; `done` are results
//! with status `ok`, `failed` the others, `running` the entries delivered and not yet settled.

mod url;

use std::collections::HashMap;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::streams::{StreamAutoClaimReply, StreamReadReply};
use redis::{AsyncConnectionConfig, RedisError, Script};
use serde_json::Value;
use tokio::sync::Mutex;

pub use url::QueueUrl;

/// The consumer group every worker reads through.
pub const GROUP: &str = "workers";

/// A worker not seen for this long is no longer counted by [`Queue::status`].
pub const WORKER_SEEN_WINDOW: Duration = Duration::from_secs(60);

/// What can go wrong with the queue.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The queue address cannot be used.
    #[error("bad queue URL: {reason}")]
    Url {
        /// What is wrong, without the address itself (it may carry a password).
        reason: String,
    },
    /// Redis refused a command or could not be reached.
    #[error("redis at {queue} ({what}): {source}")]
    Redis {
        /// The queue, as shown (password hidden).
        queue: String,
        /// What tagloop was doing.
        what: &'static str,
        /// The client's error.
        source: RedisError,
    },
    /// The queue holds something tagloop did not write.
    #[error("queue {queue}: {detail}")]
    Data {
        /// The queue, as shown.
        queue: String,
        /// What was found.
        detail: String,
    },
}

impl QueueError {
    /// Whether trying again later may succeed: the connection dropped, timed out or was refused,
    /// or Redis is still loading its data.
    pub fn is_transient(&self) -> bool {
        match self {
            QueueError::Redis { source, .. } => is_transient(source),
            _ => false,
        }
    }
}

fn is_transient(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || matches!(
            e.code(),
            Some("LOADING" | "BUSY" | "TRYAGAIN" | "MASTERDOWN")
        )
}

/// A task handed to a worker.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// The stream entry id (what is acknowledged).
    pub entry: String,
    /// The task's id, as text.
    pub key: String,
    /// The task line as pushed.
    pub task: Value,
    /// How many times the entry has been delivered, this time included (1 for a fresh task).
    pub deliveries: u64,
}

/// The queue's counts, from [`Queue::status`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct QueueStatus {
    /// Pushed and not yet taken by a worker.
    pub queued: u64,
    /// Taken by a worker and not yet settled (including tasks of dead workers not yet claimed).
    pub running: u64,
    /// Results with status `ok`.
    pub done: u64,
    /// Results with any other status.
    pub failed: u64,
    /// Workers seen in the last minute.
    pub workers: u64,
    /// Their names, sorted.
    pub worker_names: Vec<String>,
}

impl QueueStatus {
    /// Nothing queued and nothing running.
    pub fn is_settled(&self) -> bool {
        self.queued == 0 && self.running == 0
    }
}

/// What a push did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PushReport {
    /// Tasks added to the queue.
    pub added: u64,
    /// Tasks whose id the queue already had (queued, running or done).
    pub skipped: u64,
}

/// Names of the queue's keys.
#[derive(Debug, Clone)]
struct Keys {
    tasks: String,
    known: String,
    results: String,
    failed: String,
    workers: String,
}

impl Keys {
    fn new(name: &str) -> Keys {
        let k = |what: &str| format!("tagloop:{{{name}}}:{what}");
        Keys {
            tasks: k("tasks"),
            known: k("known"),
            results: k("results"),
            failed: k("failed"),
            workers: k("workers"),
        }
    }
}

/// Adds one task unless its id is known. KEYS: known, tasks. ARGV: id, task line. Returns 1 if
/// added.
const PUSH: &str = r"
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
local entry = redis.call('XADD', KEYS[2], '*', 'id', ARGV[1], 'task', ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1], entry)
return 1
";

/// Stores a result unless one is stored, then settles the entry. KEYS: results, failed, tasks.
/// ARGV: id, line, '1' if not ok, group, entry. Returns 1 if this result was stored.
const STORE: &str = r"
local won = redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
if won == 1 and ARGV[3] == '1' then redis.call('SADD', KEYS[2], ARGV[1]) end
redis.call('XACK', KEYS[3], ARGV[4], ARGV[5])
redis.call('XDEL', KEYS[3], ARGV[5])
return won
";

/// Marks a worker as seen and resets the idle time of the entries it still owns. KEYS: tasks,
/// results, workers. ARGV: group, worker, now (ms), then entry, id pairs. Returns the entries
/// whose task already has a result (another worker finished it).
const KEEP: &str = r"
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
local settled = {}
for i = 4, #ARGV, 2 do
  local entry, id = ARGV[i], ARGV[i + 1]
  if redis.call('HEXISTS', KEYS[2], id) == 1 then
    table.insert(settled, entry)
  else
    local p = redis.call('XPENDING', KEYS[1], ARGV[1], entry, entry, 1)
    if #p == 1 and p[1][2] == ARGV[2] then
      redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, entry, 'JUSTID')
    end
  end
end
return settled
";

/// Hands entries back: those the worker still owns become claimable at once. KEYS: tasks.
/// ARGV: group, worker, idle (ms), then entries.
const HAND_BACK: &str = r"
for i = 4, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if #p == 1 and p[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'IDLE', ARGV[3], 'JUSTID')
  end
end
return 0
";

/// How long a hand-back makes an entry look idle: longer than any sensible `--claim-after`.
const HANDED_BACK_IDLE_MS: u64 = 365 * 24 * 3600 * 1000;

/// A connection to one queue. Each command uses a shared multiplexed connection, opened on first
/// use and opened again after it broke; blocking reads use a second one, so they never hold up
/// result stores. A command that fails is not retried here: callers decide (see
/// [`QueueError::is_transient`]).
pub struct Queue {
    url: QueueUrl,
    shown: String,
    client: redis::Client,
    keys: Keys,
    main: Mutex<Option<MultiplexedConnection>>,
    reader: Mutex<Option<MultiplexedConnection>>,
    store: Script,
    keep: Script,
    hand_back: Script,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Queue({})", self.shown)
    }
}

/// Which connection a command uses.
#[derive(Clone, Copy)]
enum Line {
    Main,
    /// Blocking reads: a response may take as long as the block.
    Reader,
}

impl Queue {
    /// A queue handle; nothing is contacted until the first command.
    pub fn new(url: QueueUrl) -> Result<Queue, QueueError> {
        let shown = url.to_string();
        let info = url.connection_info().map_err(|source| QueueError::Redis {
            queue: shown.clone(),
            what: "reading the address",
            source,
        })?;
        let client = redis::Client::open(info).map_err(|source| QueueError::Redis {
            queue: shown.clone(),
            what: "reading the address",
            source,
        })?;
        Ok(Queue {
            keys: Keys::new(url.name()),
            url,
            shown,
            client,
            main: Mutex::new(None),
            reader: Mutex::new(None),
            store: Script::new(STORE),
            keep: Script::new(KEEP),
            hand_back: Script::new(HAND_BACK),
        })
    }

    /// The queue's address as shown (password hidden).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The address.
    pub fn url(&self) -> &QueueUrl {
        &self.url
    }

    fn err(&self, what: &'static str, source: RedisError) -> QueueError {
        QueueError::Redis {
            queue: self.shown.clone(),
            what,
            source,
        }
    }

    async fn connection(
        &self,
        line: Line,
        what: &'static str,
    ) -> Result<MultiplexedConnection, QueueError> {
        let (slot, timeout) = match line {
            Line::Main => (&self.main, Duration::from_secs(10)),
            Line::Reader => (&self.reader, Duration::from_secs(30)),
        };
        let mut slot = slot.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(timeout));
        let c = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| self.err(what, e))?;
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Forget a connection that failed, so the next command opens a new one.
    async fn failed(&self, line: Line, e: RedisError, what: &'static str) -> QueueError {
        if is_transient(&e) {
            let slot = match line {
                Line::Main => &self.main,
                Line::Reader => &self.reader,
            };
            *slot.lock().await = None;
        }
        self.err(what, e)
    }

    async fn query<T: redis::FromRedisValue>(
        &self,
        what: &'static str,
        cmd: &redis::Cmd,
    ) -> Result<T, QueueError> {
        let mut c = self.connection(Line::Main, what).await?;
        match cmd.query_async(&mut c).await {
            Ok(v) => Ok(v),
            Err(e) => Err(self.failed(Line::Main, e, what).await),
        }
    }

    async fn pipe<T: redis::FromRedisValue>(
        &self,
        what: &'static str,
        pipe: &redis::Pipeline,
    ) -> Result<T, QueueError> {
        let mut c = self.connection(Line::Main, what).await?;
        match pipe.query_async(&mut c).await {
            Ok(v) => Ok(v),
            Err(e) => Err(self.failed(Line::Main, e, what).await),
        }
    }

    async fn script<T: redis::FromRedisValue>(
        &self,
        what: &'static str,
        inv: redis::ScriptInvocation<'_>,
    ) -> Result<T, QueueError> {
        let mut c = self.connection(Line::Main, what).await?;
        match inv.invoke_async(&mut c).await {
            Ok(v) => Ok(v),
            Err(e) => Err(self.failed(Line::Main, e, what).await),
        }
    }

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

    /// Store a task's result (unless another worker stored one first) and settle its entry.
    /// Returns whether this result was the one stored.
    pub async fn store(
        &self,
        delivery_entry: &str,
        key: &str,
        line: &Value,
        ok: bool,
    ) -> Result<bool, QueueError> {
        let mut inv = self.store.prepare_invoke();
        inv.key(&self.keys.results)
            .key(&self.keys.failed)
            .key(&self.keys.tasks)
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
        let mut inv = self.keep.prepare_invoke();
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
        let mut inv = self.hand_back.prepare_invoke();
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

    /// The queue's counts.
    pub async fn status(&self) -> Result<QueueStatus, QueueError> {
        self.prepare().await?;
        let mut pipe = redis::pipe();
        pipe.cmd("HLEN").arg(&self.keys.known);
        pipe.cmd("HLEN").arg(&self.keys.results);
        pipe.cmd("SCARD").arg(&self.keys.failed);
        pipe.cmd("XPENDING").arg(&self.keys.tasks).arg(GROUP);
        pipe.cmd("HGETALL").arg(&self.keys.workers);
        let (known, stored, failed, pending, workers): (
            u64,
            u64,
            u64,
            redis::Value,
            HashMap<String, u64>,
        ) = self.pipe("reading the counts", &pipe).await?;
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
            .filter(|(_, seen)| now.saturating_sub(*seen) <= window)
            .map(|(name, _)| name)
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

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_one_hash_tag() {
        let k = Keys::new("evals");
        for key in [&k.tasks, &k.known, &k.results, &k.failed, &k.workers] {
            assert!(key.starts_with("tagloop:{evals}:"), "{key}");
        }
    }

    #[test]
    fn entries_sort_by_time_then_sequence() {
        let mut v = vec!["1700-2", "1700-10", "999-5"];
        v.sort_by_key(|e| entry_order(e));
        assert_eq!(v, ["999-5", "1700-2", "1700-10"]);
    }
}
