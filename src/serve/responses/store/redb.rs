//! The embedded backend: one [redb](https://www.redb.org) database (an embedded, crash-safe
//! B-tree file), `responses.redb` under serve's data directory, or in memory when there is
//! none (the library's default). Records by id, an index by age for the bounds (`mod.rs`), and
//! the salt, all in one file; several processes on one host may share it.

use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use super::{Limits, Outputs, Owner, Record, StoreError, new_salt, walk};

/// Response id → its record (JSON).
const RESPONSES: TableDefinition<&str, &[u8]> = TableDefinition::new("responses");
/// (made at, in Unix seconds; response id) → the record's size: the order records age out in.
const BY_AGE: TableDefinition<(u64, &str), u64> = TableDefinition::new("by_age");
/// The store's own values: `salt` (the owner hash's), `bytes` (the records' total size).
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// The name of the store's file under the data directory.
pub(crate) const FILE_NAME: &str = "responses.redb";

fn db(e: impl Into<redb::Error>) -> StoreError {
    StoreError::Db(e.into().to_string())
}

/// The embedded store.
pub(super) struct RedbStore {
    db: Database,
    salt: Vec<u8>,
    limits: Limits,
}

impl RedbStore {
    /// The store in `dir` (created with the folder if need be), or in memory without one.
    pub(super) fn open(dir: Option<&Path>, limits: Limits) -> Result<RedbStore, StoreError> {
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
        Ok(RedbStore { db, salt, limits })
    }

    pub(super) fn salt(&self) -> &[u8] {
        &self.salt
    }

    pub(super) fn put(&self, id: &str, record: &Record) -> Result<bool, StoreError> {
        let bytes = record.to_bytes()?;
        let size = bytes.len() as u64;
        let limits = self.limits;
        if !limits.fits(size) {
            return Ok(false);
        }
        let oldest_kept = limits.oldest_kept();
        let txn = self.db.begin_write().map_err(db)?;
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

    pub(super) fn get(&self, id: &str, owner: &Owner) -> Result<Option<Record>, StoreError> {
        let txn = self.db.begin_read().map_err(db)?;
        let records = match txn.open_table(RESPONSES) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(db(e)),
        };
        self.read(&records, id, owner)
    }

    fn read<R: serde::de::DeserializeOwned>(
        &self,
        records: &redb::ReadOnlyTable<&str, &[u8]>,
        id: &str,
        owner: &Owner,
    ) -> Result<Option<Record<R>>, StoreError> {
        match records.get(id).map_err(db)? {
            Some(bytes) => Record::visible(bytes.value(), owner, &self.limits),
            None => Ok(None),
        }
    }

    /// The chain, read in one transaction.
    pub(super) fn chain(
        &self,
        id: &str,
        owner: &Owner,
    ) -> Result<Option<Vec<Record<Outputs>>>, StoreError> {
        let txn = self.db.begin_read().map_err(db)?;
        let records = match txn.open_table(RESPONSES) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(db(e)),
        };
        walk(id, |id| self.read(&records, id, owner))
    }

    /// Remove `record`, stored under `id` (its owner checked by the caller).
    pub(super) fn remove(&self, id: &str, record: &Record) -> Result<(), StoreError> {
        let txn = self.db.begin_write().map_err(db)?;
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
        txn.commit().map_err(db)
    }
}

fn u64_of(bytes: &[u8]) -> u64 {
    bytes.try_into().map(u64::from_le_bytes).unwrap_or_default()
}

/// The store's salt: read, or made (random) and written when the store is new.
fn salt(database: &Database) -> Result<Vec<u8>, StoreError> {
    let txn = database.begin_write().map_err(db)?;
    let salt = {
        let mut meta = txn.open_table(META).map_err(db)?;
        let found = meta.get("salt").map_err(db)?.map(|v| v.value().to_vec());
        match found {
            Some(salt) => salt,
            None => {
                let salt = new_salt();
                meta.insert("salt", salt.as_slice()).map_err(db)?;
                salt
            }
        }
    };
    txn.commit().map_err(db)?;
    Ok(salt)
}

#[cfg(test)]
mod tests {
    use super::super::{Owner, Store, now};
    use super::*;
    use serde_json::json;
    use std::time::Duration;

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
            // Time-ordered ids, as serve makes them: one second's records go in id order.
            assert!(store.put(&format!("r{i:02}"), &r).unwrap());
        }
        assert!(
            store.get("r00", &me).unwrap().is_none(),
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
