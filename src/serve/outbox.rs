//! A streamed answer's events on their way to the client, with backpressure (issue 44 item 6).
//!
//! The core emits events from a plain callback, inside the upstream's stream: it cannot wait
//! there for a client that reads slowly. So the events go into this outbox, and the answer's
//! task drives the core's work through [`Outbox::drive`], which hands them to a bounded channel
//! between the work's steps and does not step the work again while the channel is full. The
//! work's upstream stream is then not read, and the upstream's own writes wait in its socket:
//! a client that reads nothing holds at most [`BUFFER`] events, the outbox's one step of work
//! and the sockets' buffers, whatever the upstream sends (an unbounded channel held every delta:
//! +87 MiB for 800,000 one-byte deltas, ~440 MiB at the turn cap).

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::sync::Notify;
use tokio::sync::mpsc::Sender;

use super::ServeEvent;

/// Events the channel to the client holds before the work waits for it.
pub(crate) const BUFFER: usize = 64;

/// The client went away (the channel's receiver is gone).
#[derive(Debug)]
pub(crate) struct Gone;

/// Events emitted and not yet in the channel to the client.
#[derive(Default)]
pub(crate) struct Outbox {
    queue: Mutex<VecDeque<ServeEvent>>,
    woken: Notify,
}

impl Outbox {
    /// Queue `e` (from the core's callback); the driver hands it on.
    pub(crate) fn put(&self, e: ServeEvent) {
        if let Ok(mut queue) = self.queue.lock() {
            queue.push_back(e);
        }
        self.woken.notify_one();
    }

    /// Hand every queued event to `tx`, waiting while its buffer is full.
    pub(crate) async fn flush(&self, tx: &Sender<ServeEvent>) -> Result<(), Gone> {
        loop {
            let next = self.queue.lock().ok().and_then(|mut q| q.pop_front());
            let Some(e) = next else {
                return Ok(());
            };
            tx.send(e).await.map_err(|_| Gone)?;
        }
    }

    /// Run `work` to its end, its events handed to `tx` as they come; `work` is not polled
    /// while events it emitted wait for room. What it emits in its last step stays queued
    /// (see [`Outbox::flush`]).
    pub(crate) async fn drive<T>(
        &self,
        work: impl Future<Output = T>,
        tx: &Sender<ServeEvent>,
    ) -> Result<T, Gone> {
        tokio::pin!(work);
        loop {
            self.flush(tx).await?;
            tokio::select! {
                done = &mut work => return Ok(done),
                () = self.woken.notified() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn work_waits_while_the_client_reads_nothing() {
        let outbox = Outbox::default();
        let (tx, mut rx) = tokio::sync::mpsc::channel(2);
        let emitted = AtomicUsize::new(0);
        let work = async {
            for i in 0..1000 {
                outbox.put(ServeEvent::Content(i.to_string()));
                emitted.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
            }
        };
        let stalled = tokio::time::timeout(
            std::time::Duration::from_millis(200),
            outbox.drive(work, &tx),
        )
        .await;
        assert!(stalled.is_err(), "the work ran on with nobody reading");
        // The channel's two, one being sent and the last step's: not the thousand.
        assert!(emitted.load(Ordering::SeqCst) <= 4, "{emitted:?}");
        assert_eq!(rx.recv().await, Some(ServeEvent::Content("0".into())));
    }

    #[tokio::test]
    async fn every_event_arrives_in_order() {
        let outbox = Outbox::default();
        let (tx, mut rx) = tokio::sync::mpsc::channel(BUFFER);
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(ServeEvent::Content(t)) = rx.recv().await {
                got.push(t);
            }
            got
        });
        let work = async {
            for i in 0..500 {
                outbox.put(ServeEvent::Content(i.to_string()));
                if i % 7 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        };
        outbox.drive(work, &tx).await.expect("driven");
        outbox.flush(&tx).await.expect("flushed");
        drop(tx);
        let got = reader.await.expect("reader");
        let want: Vec<String> = (0..500).map(|i| i.to_string()).collect();
        assert_eq!(got, want);
    }
}
