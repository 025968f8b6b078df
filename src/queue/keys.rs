//! The names of a queue's keys (the table in the module docs).

/// Names of the queue's keys. All five share the hash tag `{NAME}`, so a Redis Cluster puts them
/// in one slot and a script may touch any of them.
#[derive(Debug, Clone)]
pub(super) struct Keys {
    /// Stream of queued and running tasks (consumer group [`super::GROUP`]).
    pub tasks: String,
    /// Hash: every id ever pushed → its stream entry id.
    pub known: String,
    /// Hash: id → result line.
    pub results: String,
    /// Set: ids whose result is not `ok`.
    pub failed: String,
    /// Hash: worker name → last seen (ms since the epoch).
    pub workers: String,
}

impl Keys {
    /// The keys of the queue called `name`.
    pub fn new(name: &str) -> Keys {
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
}
