//! The Redis backend: one conversation space for several serve processes (behind a load
//! balancer, on any hosts), `--store redis://[:PASSWORD@]HOST[:PORT][/DB]`.
//!
//! The keys, all under one hash tag (`{tagloop-responses}`, so a Redis Cluster keeps them in
//! one slot and the scripts may touch them together):
//!
//! * `…:r:ID`: a record (JSON, as `redb.rs` keeps it), set to expire `max_age` after it was made;
//! * `…:ages` (a sorted set, id by time made), `…:sizes` (a hash, id → bytes) and `…:bytes`
//!   (their sum): the index the size and age bounds are kept with, by `put.lua` in the same
//!   step as the write, exactly as the embedded store does in one transaction;
//! * `…:salt`: the owner hash's salt, made by the first process that finds none (`SET NX`), read
//!   by every other, so a key is the same owner whichever process it reaches.
//!
//! Every command has a time limit ([`CONNECT_TIMEOUT`], [`COMMAND_TIMEOUT`]): a Redis that is
//! down or does not answer is an [`StoreError::Unreachable`] in seconds, never a request hung.
//! Connections are blocking ones (the store's callers are on blocking threads), a few kept
//! idle for the next request; one that failed is dropped and the command tried once more on a
//! new connection (a Redis restarted since), which every command here may be (each is
//! idempotent).

use std::sync::Mutex;
use std::time::Duration;

use redis::{Connection, RedisError, Script};

use super::{Limits, Owner, Record, StoreError, new_salt};

/// Longest wait for a connection (TCP, then `AUTH` / `SELECT`).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest wait for one command's answer (or for it to be written).
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections kept idle between requests.
const IDLE: usize = 8;

/// The keys' common start.
const PREFIX: &str = "{tagloop-responses}:";

/// The Redis store.
pub(super) struct RedisStore {
    client: redis::Client,
    /// Where it is, as logs and errors show it (`host:port/db`, no password).
    at: String,
    salt: Vec<u8>,
    limits: Limits,
    idle: Mutex<Vec<Connection>>,
    put: Script,
    remove: Script,
}

fn key(what: &str) -> String {
    format!("{PREFIX}{what}")
}

fn record_key(id: &str) -> String {
    format!("{PREFIX}r:{id}")
}

impl RedisStore {
    /// The store at `url`, its salt read (or made): a Redis that cannot be reached is an error
    /// now, when serve starts, rather than at the first request.
    pub(super) fn open(url: &str, limits: Limits) -> Result<RedisStore, StoreError> {
        // The words of a parse error may quote the URL, and with it a password: not used.
        let client = redis::Client::open(url.trim()).map_err(|_| {
            StoreError::Db(
                "the store is not a Redis URL: expected redis://[:PASSWORD@]HOST[:PORT][/DB]"
                    .into(),
            )
        })?;
        let info = client.get_connection_info();
        let at = format!("{}/{}", info.addr(), info.redis_settings().db());
        let mut store = RedisStore {
            client,
            at,
            salt: Vec::new(),
            limits,
            idle: Mutex::new(Vec::new()),
            put: Script::new(include_str!("put.lua")),
            remove: Script::new(include_str!("remove.lua")),
        };
        let salt_key = key("salt");
        let made = new_salt();
        store.salt = store.run(|c| {
            let _: () = redis::cmd("SET")
                .arg(&salt_key)
                .arg(&made)
                .arg("NX")
                .query(c)?;
            redis::cmd("GET").arg(&salt_key).query(c)
        })?;
        if store.salt.is_empty() {
            return Err(StoreError::Db(format!(
                "the salt at {} is empty; remove that key",
                key("salt")
            )));
        }
        Ok(store)
    }

    pub(super) fn salt(&self) -> &[u8] {
        &self.salt
    }

    /// A connection: an idle one, else a new one within the time limits.
    fn connection(&self) -> Result<(Connection, bool), RedisError> {
        if let Some(c) = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Ok((c, true));
        }
        let c = self.client.get_connection_with_timeout(CONNECT_TIMEOUT)?;
        c.set_read_timeout(Some(COMMAND_TIMEOUT))?;
        c.set_write_timeout(Some(COMMAND_TIMEOUT))?;
        Ok((c, false))
    }

    /// Run `f` on a connection (a second time on a new one when an idle one had broken).
    fn run<T>(
        &self,
        mut f: impl FnMut(&mut Connection) -> Result<T, RedisError>,
    ) -> Result<T, StoreError> {
        let mut retried = false;
        loop {
            let (mut c, was_idle) = self.connection().map_err(|e| self.failed(e))?;
            match f(&mut c) {
                Ok(v) => {
                    let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
                    if idle.len() < IDLE {
                        idle.push(c);
                    }
                    return Ok(v);
                }
                Err(e) if was_idle && !retried && broken(&e) => retried = true,
                Err(e) => return Err(self.failed(e)),
            }
        }
    }

    fn failed(&self, e: RedisError) -> StoreError {
        if broken(&e) {
            StoreError::Unreachable {
                at: self.at.clone(),
                reason: e.to_string(),
            }
        } else {
            StoreError::Db(format!("Redis at {}: {e}", self.at))
        }
    }

    pub(super) fn put(&self, id: &str, record: &Record) -> Result<bool, StoreError> {
        let bytes = record.to_bytes()?;
        if !self.limits.fits(bytes.len() as u64) {
            return Ok(false);
        }
        let ttl = self.limits.max_age.as_secs().max(1);
        let (ages, sizes, total) = (key("ages"), key("sizes"), key("bytes"));
        let _: u64 = self.run(|c| {
            self.put
                .key(record_key(id))
                .key(&ages)
                .key(&sizes)
                .key(&total)
                .arg(id)
                .arg(bytes.as_slice())
                .arg(record.created)
                .arg(ttl)
                .arg(self.limits.max_bytes)
                .arg(self.limits.oldest_kept())
                .arg(key("r:"))
                .invoke(c)
        })?;
        Ok(true)
    }

    pub(super) fn get<R: serde::de::DeserializeOwned>(
        &self,
        id: &str,
        owner: &Owner,
    ) -> Result<Option<Record<R>>, StoreError> {
        let bytes: Option<Vec<u8>> =
            self.run(|c| redis::cmd("GET").arg(record_key(id)).query(c))?;
        match bytes {
            Some(bytes) => Record::visible(&bytes, owner, &self.limits),
            None => Ok(None),
        }
    }

    /// Remove the record `id` (its owner checked by the caller) and its place in the index.
    pub(super) fn remove(&self, id: &str) -> Result<(), StoreError> {
        let _: u64 = self.run(|c| {
            self.remove
                .key(record_key(id))
                .key(key("ages"))
                .key(key("sizes"))
                .key(key("bytes"))
                .arg(id)
                .invoke(c)
        })?;
        Ok(())
    }
}

/// Whether `e` says the connection (not the command) failed: refused, dropped, timed out.
fn broken(e: &RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout()
}
