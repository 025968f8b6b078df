//! The stored Responses: what `store: true` keeps so that a later request can continue it by
//! `previous_response_id`, and that `GET` / `DELETE /v1/responses/{id}` read and remove.
//!
//! One [redb](https://www.redb.org) database (an embedded, crash-safe B-tree file): a file
//! `responses.redb` under serve's data directory, or in memory when there is none (the
//! library's default). Each record is one response: the items its request added, the response
//! object as the client got it, the id of the response it continued, when it was made, and the
//! hash of the client key that made it. A conversation is the chain of its responses, read back
//! oldest first, so a turn stores only what it added (storage grows with the conversation, not
//! with its square).
//!
//! Bounds: the records' total size (`max_bytes`) and age (`max_age`): each write drops the
//! oldest records past either, in the same transaction; a record older than `max_age` is never
//! read, even before it is dropped; one record holds at most a quarter of `max_bytes`; a chain
//! is read at most [`MAX_CHAIN`] responses deep.
//!
//! The owner: a record keeps `sha256(salt ‖ key)` of the client's key (the salt is the store's
//! own, random, made when the file is), never the key; a lookup under another key finds
//! nothing, exactly as an id that does not exist. No record holds the upstream key: the response
//! was redacted before the client got it, and the input is redacted before it is written.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The store `cfg` asks for: a file in its data directory, or in memory.
pub(crate) fn open_store(
    cfg: &crate::serve::ServeConfig,
) -> Result<Store, crate::serve::ServeError> {
    let limits = Limits {
        max_bytes: cfg.store_max_bytes,
        max_age: cfg.store_max_age,
    };
    Store::open(cfg.data_dir.as_deref(), limits)
        .map_err(|e| crate::serve::ServeError::Config(e.to_string()))
}

/// Response id → its record (JSON).
const RESPONSES: TableDefinition<&str, &[u8]> = TableDefinition::new("responses");
/// (made at, in Unix seconds; response id) → the record's size: the order records age out in.
const BY_AGE: TableDefinition<(u64, &str), u64> = TableDefinition::new("by_age");
/// The store's own values: `salt` (the owner hash's), `bytes` (the records' total size).
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// Deepest chain of responses read back for one `previous_response_id`.
pub(crate) const MAX_CHAIN: usize = 1024;

/// The name of the store's file under the data directory.
pub(crate) const FILE_NAME: &str = "responses.redb";

/// A failure of the store (its file, a transaction). Never a client's mistake: the client gets
/// a 500 without these words, the log gets them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum StoreError {
    /// The database failed (opening its file, a transaction, a read or a write).
    #[error("the response store failed: {0}")]
    Db(String),
    /// A stored record could not be read back (a file written by something else).
    #[error("a stored response could not be read: {0}")]
    Corrupt(String),
}

fn db(e: impl Into<redb::Error>) -> StoreError {
    StoreError::Db(e.into().to_string())
}

/// How much the store keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The records' total size, in bytes.
    pub max_bytes: u64,
    /// How long a record is kept.
    pub max_age: Duration,
}

/// One stored response.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Record {
    /// `sha256(salt ‖ key)` of the client key that made it, in hex.
    pub owner: String,
    /// When it was made (Unix seconds).
    pub created: u64,
    /// The response it continued.
    pub previous: Option<String>,
    /// The items its request added (after `previous`'s), as the request gave them.
    pub input: Vec<Value>,
    /// The response object as the client got it.
    pub response: Value,
}

/// Who may read a record: the hash of a client's key under this store's salt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner(String);

impl Owner {
    /// The hash, for a [`Record::owner`].
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    fn owns(&self, record: &Record) -> bool {
        bool::from(subtle::ConstantTimeEq::ct_eq(
            self.0.as_bytes(),
            record.owner.as_bytes(),
        ))
    }
}

/// The store; cheap to clone (one database behind an `Arc`).
#[derive(Clone)]
pub(crate) struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    db: Database,
    salt: Vec<u8>,
    limits: Limits,
}

/// Now, in Unix seconds.
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Store {
    /// The store in `dir` (created with the folder if need be), or in memory without one.
    pub(crate) fn open(dir: Option<&Path>, limits: Limits) -> Result<Store, StoreError> {
        let db = match dir {
            Some(dir) => {
                std::fs::create_dir_all(dir).map_err(|e| {
                    StoreError::Db(format!("cannot create the data directory: {e}"))
                })?;
                // Several serve processes may share one file (one conversation space behind
                // a load balancer on one host): one write transaction at a time among them.
                Database::builder()
                    .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
                    .create(dir.join(FILE_NAME))
                    .map_err(db)?
            }
            None => Database::builder()
                .create_with_backend(redb::backends::InMemoryBackend::new())
                .map_err(db)?,
        };
        let salt = salt(&db)?;
        Ok(Store {
            inner: Arc::new(Inner { db, salt, limits }),
        })
    }

    /// The owner that a client presenting `key` is (an empty key is the key-less clients').
    pub(crate) fn owner(&self, key: &[u8]) -> Owner {
        let mut hash = Sha256::new();
        hash.update(&self.inner.salt);
        hash.update(key);
        let digest = hash.finalize();
        Owner(digest.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Keep `record` under `id`, dropping the oldest records past the store's bounds. A record
    /// larger than a quarter of the bound is not kept (false).
    pub(crate) fn put(&self, id: &str, record: &Record) -> Result<bool, StoreError> {
        let bytes = serde_json::to_vec(record).map_err(|e| StoreError::Db(e.to_string()))?;
        let size = bytes.len() as u64;
        let limits = self.inner.limits;
        if size > limits.max_bytes / 4 {
            return Ok(false);
        }
        let oldest_kept = now().saturating_sub(limits.max_age.as_secs());
        let txn = self.inner.db.begin_write().map_err(db)?;
        {
            let mut records = txn.open_table(RESPONSES).map_err(db)?;
            let mut ages = txn.open_table(BY_AGE).map_err(db)?;
            let mut meta = txn.open_table(META).map_err(db)?;
            let mut total = match meta.get("bytes").map_err(db)? {
                Some(v) => u64_of(v.value()),
                None => 0,
            };
            let replaced = records
                .insert(id, bytes.as_slice())
                .map_err(db)?
                .map(|old| old.value().len() as u64);
            total = total.saturating_sub(replaced.unwrap_or(0)) + size;
            ages.insert((record.created, id), size).map_err(db)?;
            // The oldest first, while the total is over the bound or the oldest too old.
            loop {
                let Some((created, victim)) = ages
                    .first()
                    .map_err(db)?
                    .map(|(k, _)| (k.value().0, k.value().1.to_string()))
                else {
                    break;
                };
                if total <= limits.max_bytes && created >= oldest_kept {
                    break;
                }
                if let Some((_, size)) = ages.pop_first().map_err(db)? {
                    total = total.saturating_sub(size.value());
                }
                records.remove(victim.as_str()).map_err(db)?;
            }
            meta.insert("bytes", total.to_le_bytes().as_slice())
                .map_err(db)?;
        }
        txn.commit().map_err(db)?;
        Ok(true)
    }

    /// The record `id` if `owner` made it and it is not too old.
    pub(crate) fn get(&self, id: &str, owner: &Owner) -> Result<Option<Record>, StoreError> {
        let txn = self.inner.db.begin_read().map_err(db)?;
        let records = match txn.open_table(RESPONSES) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(db(e)),
        };
        self.read(&records, id, owner)
    }

    fn read(
        &self,
        records: &redb::ReadOnlyTable<&str, &[u8]>,
        id: &str,
        owner: &Owner,
    ) -> Result<Option<Record>, StoreError> {
        let Some(bytes) = records.get(id).map_err(db)? else {
            return Ok(None);
        };
        let record: Record = serde_json::from_slice(bytes.value())
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let oldest_kept = now().saturating_sub(self.inner.limits.max_age.as_secs());
        Ok((owner.owns(&record) && record.created >= oldest_kept).then_some(record))
    }

    /// The conversation that ends with `id`: its responses, oldest first, all `owner`'s. `None`
    /// when `id` or any response before it is missing, too old or another owner's, or the chain
    /// is deeper than [`MAX_CHAIN`].
    pub(crate) fn chain(&self, id: &str, owner: &Owner) -> Result<Option<Vec<Record>>, StoreError> {
        let txn = self.inner.db.begin_read().map_err(db)?;
        let records = match txn.open_table(RESPONSES) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(db(e)),
        };
        let mut chain = Vec::new();
        let mut next = Some(id.to_string());
        while let Some(id) = next {
            if chain.len() >= MAX_CHAIN {
                return Ok(None);
            }
            let Some(record) = self.read(&records, &id, owner)? else {
                return Ok(None);
            };
            next = record.previous.clone();
            chain.push(record);
        }
        chain.reverse();
        Ok(Some(chain))
    }

    /// Remove the record `id` if `owner` made it; whether it did.
    pub(crate) fn delete(&self, id: &str, owner: &Owner) -> Result<bool, StoreError> {
        let Some(record) = self.get(id, owner)? else {
            return Ok(false);
        };
        let txn = self.inner.db.begin_write().map_err(db)?;
        {
            let mut records = txn.open_table(RESPONSES).map_err(db)?;
            let mut ages = txn.open_table(BY_AGE).map_err(db)?;
            let mut meta = txn.open_table(META).map_err(db)?;
            let removed = records
                .remove(id)
                .map_err(db)?
                .map(|v| v.value().len() as u64);
            ages.remove((record.created, id)).map_err(db)?;
            let total = match meta.get("bytes").map_err(db)? {
                Some(v) => u64_of(v.value()),
                None => 0,
            };
            let total = total.saturating_sub(removed.unwrap_or(0));
            meta.insert("bytes", total.to_le_bytes().as_slice())
                .map_err(db)?;
        }
        txn.commit().map_err(db)?;
        Ok(true)
    }
}

fn u64_of(bytes: &[u8]) -> u64 {
    bytes.try_into().map(u64::from_le_bytes).unwrap_or_default()
}

/// The store's salt: read, or made (random) and written when the store is new.
fn salt(db: &Database) -> Result<Vec<u8>, StoreError> {
    let txn = db.begin_write().map_err(db_err)?;
    let salt = {
        let mut meta = txn.open_table(META).map_err(db_err)?;
        let found = meta
            .get("salt")
            .map_err(db_err)?
            .map(|v| v.value().to_vec());
        match found {
            Some(salt) => salt,
            None => {
                let mut salt = uuid::Uuid::new_v4().as_bytes().to_vec();
                salt.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
                meta.insert("salt", salt.as_slice()).map_err(db_err)?;
                salt
            }
        }
    };
    txn.commit().map_err(db_err)?;
    Ok(salt)
}

fn db_err(e: impl Into<redb::Error>) -> StoreError {
    db(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limits() -> Limits {
        Limits {
            max_bytes: 1 << 20,
            max_age: Duration::from_secs(3600),
        }
    }

    fn record(owner: &Owner, previous: Option<&str>, created: u64, text: &str) -> Record {
        Record {
            owner: owner.as_str().into(),
            created,
            previous: previous.map(str::to_string),
            input: vec![json!({"type": "message", "role": "user", "content": text})],
            response: json!({"output": []}),
        }
    }

    #[test]
    fn a_chain_reads_back_oldest_first_for_its_owner_only() {
        let store = Store::open(None, limits()).unwrap();
        let me = store.owner(b"key-one");
        let other = store.owner(b"key-two");
        assert_ne!(me, other);
        store.put("r1", &record(&me, None, now(), "one")).unwrap();
        store
            .put("r2", &record(&me, Some("r1"), now(), "two"))
            .unwrap();
        let chain = store.chain("r2", &me).unwrap().unwrap();
        let texts: Vec<_> = chain
            .iter()
            .map(|r| r.input[0]["content"].clone())
            .collect();
        assert_eq!(texts, vec![json!("one"), json!("two")]);
        assert!(store.chain("r2", &other).unwrap().is_none());
        assert!(store.get("r1", &other).unwrap().is_none());
        assert!(!store.delete("r1", &other).unwrap());
        assert!(store.delete("r1", &me).unwrap());
        // The chain is broken where its first response was deleted.
        assert!(store.chain("r2", &me).unwrap().is_none());
    }

    #[test]
    fn the_oldest_records_go_past_the_size_bound_and_old_ones_are_never_read() {
        let small = Limits {
            max_bytes: 4000,
            max_age: Duration::from_secs(3600),
        };
        let store = Store::open(None, small).unwrap();
        let me = store.owner(b"k");
        for i in 0..40 {
            let r = record(&me, None, now(), &format!("turn {i} {}", "x".repeat(100)));
            assert!(store.put(&format!("r{i}"), &r).unwrap());
        }
        assert!(
            store.get("r0", &me).unwrap().is_none(),
            "the oldest was kept"
        );
        assert!(store.get("r39", &me).unwrap().is_some());
        let old = record(&me, None, now() - 7200, "old");
        store.put("old", &old).unwrap();
        assert!(
            store.get("old", &me).unwrap().is_none(),
            "a record past its age was read"
        );
        let huge = record(&me, None, now(), &"y".repeat(2000));
        assert!(
            !store.put("huge", &huge).unwrap(),
            "a record over a quarter was kept"
        );
    }

    #[test]
    fn records_and_owners_survive_reopening_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let owner = {
            let store = Store::open(Some(dir.path()), limits()).unwrap();
            let me = store.owner(b"k");
            store.put("r1", &record(&me, None, now(), "kept")).unwrap();
            me
        };
        let store = Store::open(Some(dir.path()), limits()).unwrap();
        assert_eq!(store.owner(b"k"), owner, "the salt changed on reopening");
        assert!(store.get("r1", &owner).unwrap().is_some());
        // A second handle on the same file (another serve process) sees and adds records.
        let second = Store::open(Some(dir.path()), limits()).unwrap();
        assert!(second.get("r1", &owner).unwrap().is_some());
        second
            .put("r2", &record(&owner, Some("r1"), now(), "more"))
            .unwrap();
        assert_eq!(store.chain("r2", &owner).unwrap().unwrap().len(), 2);
    }
}
