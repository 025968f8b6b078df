//! Errors of the session store.

/// Errors of the session store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// A transcript could not be created, written or read.
    #[error("session file {path}: {source}")]
    Io {
        /// The transcript, or the session directory when creating or listing it failed.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// No session with that id or path exists.
    #[error("no session `{0}` (see `tagloop sessions` for the ids)")]
    NotFound(String),
    /// The start of an id that several sessions share.
    #[error(
        "`{prefix}` is the start of several sessions: {}{}; give more of the id",
        ids.join(", "),
        if *more > 0 { format!(" and {more} more") } else { String::new() }
    )]
    Ambiguous {
        /// What the user typed.
        prefix: String,
        /// The first of the ids it starts, in order.
        ids: Vec<String>,
        /// How many more it starts.
        more: usize,
    },
    /// A record could not be serialised.
    #[error("cannot encode a transcript record: {0}")]
    Encode(#[from] serde_json::Error),
}
