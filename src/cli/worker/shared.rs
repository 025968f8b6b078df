//! What the worker's parts (taker, keeper, storer, runner) share: the queue, the tasks held and
//! the tally of what was done.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use tokio::sync::{Mutex, watch};
use tokio::task::AbortHandle;

use tagloop::queue::Queue;

/// A task this worker holds: computing, or computed and waiting to be stored.
pub(super) struct Held {
    /// The task's id, as text.
    pub(super) key: String,
    /// Stops the computation; `None` once it is computed.
    pub(super) abort: Option<AbortHandle>,
}

/// What the worker did, for its last line.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) ran: AtomicU64,
    pub(super) not_ok: AtomicU64,
    pub(super) duplicates: AtomicU64,
    pub(super) handed_back: AtomicU64,
}

/// What the taker, the keeper and the storer share.
#[derive(Clone)]
pub(super) struct Shared {
    pub(super) queue: Arc<Queue>,
    /// This worker's name in the queue (its consumer name).
    pub(super) name: String,
    /// The tasks held, by stream entry id.
    pub(super) held: Arc<Mutex<HashMap<String, Held>>>,
    pub(super) tally: Arc<Tally>,
    /// How many stop signals were received.
    pub(super) signals: watch::Receiver<u8>,
}
