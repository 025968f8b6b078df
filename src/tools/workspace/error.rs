//! Why a workspace could not be opened.

use std::path::PathBuf;

/// Why a workspace could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    /// The root does not exist or cannot be canonicalised.
    #[error("workspace root {path}: {source}")]
    Root {
        /// The root as passed, before canonicalisation.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The root exists but is not a directory.
    #[error("workspace root {0} is not a directory")]
    NotADirectory(PathBuf),
}
