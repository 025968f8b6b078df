//! The Lua scripts that make each multi-key step atomic. Each `.lua` file starts with its
//! contract (KEYS, ARGV, what it returns); Redis runs a script as one command, so no other client
//! sees a step half done.

use redis::Script;

/// `push.lua`: adds a task unless its id is known. Sent as `EVAL`, many in one pipeline.
pub(super) const PUSH: &str = include_str!("push.lua");

/// How long a hand-back makes an entry look idle: longer than any sensible `--claim-after`.
pub(super) const HANDED_BACK_IDLE_MS: u64 = 365 * 24 * 3600 * 1000;

/// The scripts run one at a time, loaded once per server (by hash, reloaded when missing).
pub(super) struct Scripts {
    /// `deliver.lua`: hand entries to a worker, each checked for size before it is sent.
    pub deliver: Script,
    /// `store.lua`: store a result unless one is stored; settle the entry.
    pub store: Script,
    /// `keep.lua`: mark the worker seen; keep its entries from being claimed.
    pub keep: Script,
    /// `hand_back.lua`: make entries the worker owns claimable at once.
    pub hand_back: Script,
}

impl Scripts {
    pub fn new() -> Scripts {
        Scripts {
            deliver: Script::new(include_str!("deliver.lua")),
            store: Script::new(include_str!("store.lua")),
            keep: Script::new(include_str!("keep.lua")),
            hand_back: Script::new(include_str!("hand_back.lua")),
        }
    }
}
