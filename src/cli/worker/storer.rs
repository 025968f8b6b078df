//! The storer: stores each computed result and settles its entry, retrying while Redis is
//! unreachable. A result stays in memory until Redis has it; after a second signal with Redis
//! still away, the rest go to a local file rather than being lost.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use serde_json::Value;
use tokio::sync::mpsc;

use super::shared::Shared;
use super::signals::Backoff;

/// A computed result on its way to Redis. `line` is `Null` when there is nothing to store (the
/// task already had a result): only the entry is settled.
pub(super) struct Computed {
    pub entry: String,
    pub key: String,
    pub line: Value,
    pub ok: bool,
}

/// Store computed results in order, each until Redis takes it. Returns the file the unstored
/// results went to when a second signal ended the wait.
pub(super) async fn store_results(
    shared: Shared,
    mut rx: mpsc::UnboundedReceiver<Computed>,
) -> Option<PathBuf> {
    let mut backoff = Backoff::new();
    let mut signals = shared.signals.clone();
    while let Some(c) = rx.recv().await {
        if let Some(h) = shared.held.lock().await.get_mut(&c.entry) {
            h.abort = None; // computed: nothing to stop or hand back
        }
        loop {
            match shared.queue.store(&c.entry, &c.key, &c.line, c.ok).await {
                Ok(won) => {
                    if !won && !c.line.is_null() {
                        shared.tally.duplicates.fetch_add(1, Ordering::Relaxed);
                        tracing::info!("task {}: another worker's result was stored first", c.key);
                    }
                    shared.held.lock().await.remove(&c.entry);
                    backoff.reset();
                    break;
                }
                Err(e) => {
                    if *signals.borrow() > 1 {
                        let mut rest = vec![c];
                        while let Ok(more) = rx.try_recv() {
                            rest.push(more);
                        }
                        return spool(&shared.name, &rest);
                    }
                    if e.is_transient() {
                        tracing::warn!(
                            "{e}; the result of task {} is kept and stored when Redis is back",
                            c.key
                        );
                    } else {
                        tracing::error!("{e}; storing the result of task {} again", c.key);
                    }
                    tokio::select! {
                        _ = backoff.wait() => {}
                        _ = signals.changed() => {}
                    }
                }
            }
        }
    }
    None
}

/// Write results Redis never took to `tagloop-unstored-NAME.jsonl` (appended) in the current
/// folder.
fn spool(name: &str, rest: &[Computed]) -> Option<PathBuf> {
    let path = PathBuf::from(format!("tagloop-unstored-{name}.jsonl"));
    let mut text = String::new();
    for c in rest.iter().filter(|c| !c.line.is_null()) {
        text.push_str(&c.line.to_string());
        text.push('\n');
    }
    use std::io::Write;
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()));
    match written {
        Ok(()) => Some(std::path::absolute(&path).unwrap_or(path)),
        Err(e) => {
            eprintln!(
                "cannot write {}: {e}; lost results:\n{text}",
                path.display()
            );
            Some(path)
        }
    }
}
