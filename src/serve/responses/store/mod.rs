//! The stored Responses: what `store: true` keeps so that a later request can continue it by
//! `previous_response_id`, and that `GET` / `DELETE /v1/responses/{id}` read and remove.
//!
//! Two backends behind one [`Store`]: an embedded [redb](https://www.redb.org) file under
//! serve's data directory, or in memory (`redb.rs`, the default), and a Redis server shared by
//! several serve processes behind a load balancer (`redis.rs`, [`ServeConfig::store_redis`]).
//! What both keep and how they bound it is the same, and written here:
//!
//! * Each record is one response: the items its request added, the response object as the
//!   client got it, the id of the response it continued, when it was made, and the hash of the
//!   client key that made it. A conversation is the chain of its responses, read back oldest
//!   first ([`walk`]), so a turn stores only what it added (storage grows with the
//!   conversation, not with its square).
//! * Bounds: the records' total size (`max_bytes`) and age (`max_age`): each write drops the
//!   oldest records past either, atomically with the write (oldest by the second made, then by
//!   id, which serve makes time-ordered: `serve/http.rs`); a record older than `max_age` is
//!   never read, even before it is dropped; one record holds at most a quarter of `max_bytes`;
//!   a chain is read at most [`MAX_CHAIN`] responses deep.
//! * The owner: a record keeps `sha256(salt ‖ key)` of the client's key (the salt is the
//!   store's own, random, made when the store is, shared by every process that opens it), never
//!   the key; a lookup under another key finds nothing, exactly as an id that does not exist.
//!   No record holds the upstream key: the response was redacted before the client got it, and
//!   the input is redacted before it is written (`render.rs`).
//!
//! [`ServeConfig::store_redis`]: crate::serve::ServeConfig::store_redis

mod redb;
mod redis;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

#[cfg(test)]
pub(crate) use redb::FILE_NAME;

/// The store `cfg` asks for: its Redis, else a file in its data directory, else memory.
pub(crate) fn open_store(
    cfg: &crate::serve::ServeConfig,
) -> Result<Store, crate::serve::ServeError> {
    let limits = Limits {
        max_bytes: cfg.store_max_bytes,
        max_age: cfg.store_max_age,
    };
    let backend = match &cfg.store_redis {
        Some(url) => Backend::Redis(Box::new(redis::RedisStore::open(url.expose(), limits)?)),
        None => Backend::Redb(redb::RedbStore::open(cfg.data_dir.as_deref(), limits)?),
    };
    Ok(Store {
        inner: Arc::new(backend),
    })
}

/// Deepest chain of responses read back for one `previous_response_id`.
pub(crate) const MAX_CHAIN: usize = 1024;

/// A failure of the store. Never a client's mistake: the client gets a 500 with words that
/// name no address (`mod.rs`'s `store_failed`), the log gets these.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum StoreError {
    /// The database failed (opening its file, a transaction, a read or a write; a command
    /// Redis refused).
    #[error("the response store failed: {0}")]
    Db(String),
    /// The store's server could not be reached or did not answer in time.
    #[error("the response store at {at} could not be reached: {reason}")]
    Unreachable {
        /// Its address, without a password.
        at: String,
        /// What the connection said.
        reason: String,
    },
    /// A stored record could not be read back (a file written by something else).
    #[error("a stored response could not be read: {0}")]
    Corrupt(String),
}

impl From<StoreError> for crate::serve::ServeError {
    /// At setup (`router`), the whole error: the user who configured the store reads it.
    fn from(e: StoreError) -> Self {
        crate::serve::ServeError::Config(e.to_string())
    }
}

/// How much the store keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The records' total size, in bytes.
    pub max_bytes: u64,
    /// How long a record is kept.
    pub max_age: Duration,
}

impl Limits {
    /// The oldest `created` still readable now.
    fn oldest_kept(&self) -> u64 {
        now().saturating_sub(self.max_age.as_secs())
    }

    /// Whether a record of `size` bytes may be kept at all.
    fn fits(&self, size: u64) -> bool {
        size <= self.max_bytes / 4
    }
}

/// One stored response. `R` is how much of the response object is read back: all of it
/// ([`Value`], for `GET`), or only its output ([`Outputs`], for a continuation, which then
/// skips the echoed tools and instructions without building them).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Record<R = Value> {
    /// `sha256(salt ‖ key)` of the client key that made it, in hex.
    pub owner: String,
    /// When it was made (Unix seconds).
    pub created: u64,
    /// The response it continued.
    pub previous: Option<String>,
    /// The items its request added (after `previous`'s), as the request gave them.
    pub input: Vec<Value>,
    /// The response object as the client got it.
    pub response: R,
}

/// The part of a stored response object a continuation reads: its output items.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Outputs {
    /// The response's `output`.
    #[serde(default)]
    pub output: Vec<Value>,
}

impl Record {
    /// The record as stored (JSON).
    fn to_bytes(&self) -> Result<Vec<u8>, StoreError> {
        serde_json::to_vec(self).map_err(|e| StoreError::Db(e.to_string()))
    }
}

impl<R: serde::de::DeserializeOwned> Record<R> {
    /// A stored record, if `owner` made it and it is not older than `limits` keep.
    fn visible(bytes: &[u8], owner: &Owner, limits: &Limits) -> Result<Option<Self>, StoreError> {
        let record: Self =
            serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mine = owner.owns(&record.owner);
        Ok((mine && record.created >= limits.oldest_kept()).then_some(record))
    }
}

/// Who may read a record: the hash of a client's key under this store's salt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner(String);

impl Owner {
    /// The owner a client presenting `key` is, under `salt`.
    fn of(salt: &[u8], key: &[u8]) -> Owner {
        let mut hash = Sha256::new();
        hash.update(salt);
        hash.update(key);
        let digest = hash.finalize();
        Owner(digest.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The hash, for a [`Record::owner`].
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    fn owns(&self, owner: &str) -> bool {
        bool::from(subtle::ConstantTimeEq::ct_eq(
            self.0.as_bytes(),
            owner.as_bytes(),
        ))
    }
}

/// A new random salt (32 bytes).
fn new_salt() -> Vec<u8> {
    let mut salt = uuid::Uuid::new_v4().as_bytes().to_vec();
    salt.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    salt
}

/// The conversation that ends with `id`, oldest first, each response read by `read` (which
/// answers `None` for a response missing, too old or another owner's). `None` when any is, or
/// the chain is deeper than [`MAX_CHAIN`].
fn walk<R>(
    id: &str,
    mut read: impl FnMut(&str) -> Result<Option<Record<R>>, StoreError>,
) -> Result<Option<Vec<Record<R>>>, StoreError> {
    let mut chain = Vec::new();
    let mut next = Some(id.to_string());
    while let Some(id) = next {
        if chain.len() >= MAX_CHAIN {
            return Ok(None);
        }
        let Some(record) = read(&id)? else {
            return Ok(None);
        };
        next = record.previous.clone();
        chain.push(record);
    }
    chain.reverse();
    Ok(Some(chain))
}

/// Now, in Unix seconds.
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The store; cheap to clone (one backend behind an `Arc`). Every method blocks (a file, or a
/// server within its time limits): callers run them on a blocking thread.
#[derive(Clone)]
pub(crate) struct Store {
    inner: Arc<Backend>,
}

enum Backend {
    Redb(redb::RedbStore),
    Redis(Box<redis::RedisStore>),
}

impl Store {
    /// The owner that a client presenting `key` is (an empty key is the key-less clients').
    pub(crate) fn owner(&self, key: &[u8]) -> Owner {
        let salt = match &*self.inner {
            Backend::Redb(s) => s.salt(),
            Backend::Redis(s) => s.salt(),
        };
        Owner::of(salt, key)
    }

    /// Keep `record` under `id`, dropping the oldest records past the store's bounds. A record
    /// larger than a quarter of the bound is not kept (false).
    pub(crate) fn put(&self, id: &str, record: &Record) -> Result<bool, StoreError> {
        match &*self.inner {
            Backend::Redb(s) => s.put(id, record),
            Backend::Redis(s) => s.put(id, record),
        }
    }

    /// The record `id` if `owner` made it and it is not too old.
    pub(crate) fn get(&self, id: &str, owner: &Owner) -> Result<Option<Record>, StoreError> {
        match &*self.inner {
            Backend::Redb(s) => s.get(id, owner),
            Backend::Redis(s) => s.get(id, owner),
        }
    }

    /// The conversation that ends with `id`: its responses, oldest first, all `owner`'s. `None`
    /// when `id` or any response before it is missing, too old or another owner's, or the chain
    /// is deeper than [`MAX_CHAIN`].
    /// Each response is read as far as its output ([`Outputs`]).
    pub(crate) fn chain(
        &self,
        id: &str,
        owner: &Owner,
    ) -> Result<Option<Vec<Record<Outputs>>>, StoreError> {
        match &*self.inner {
            Backend::Redb(s) => s.chain(id, owner),
            Backend::Redis(s) => walk(id, |id| s.get(id, owner)),
        }
    }

    /// Remove the record `id` if `owner` made it; whether it did.
    pub(crate) fn delete(&self, id: &str, owner: &Owner) -> Result<bool, StoreError> {
        let Some(record) = self.get(id, owner)? else {
            return Ok(false);
        };
        match &*self.inner {
            Backend::Redb(s) => s.remove(id, &record)?,
            Backend::Redis(s) => s.remove(id)?,
        }
        Ok(true)
    }

    /// The embedded store in `dir` (or memory): for the tests that drive the store directly.
    #[cfg(test)]
    pub(crate) fn open(dir: Option<&std::path::Path>, limits: Limits) -> Result<Store, StoreError> {
        Ok(Store {
            inner: Arc::new(Backend::Redb(redb::RedbStore::open(dir, limits)?)),
        })
    }
}
