//! Where transcripts go, asked by every command that reads or writes sessions.

use std::path::{Path, PathBuf};

use clap::Args;

/// Where transcripts go: `--session-dir`, else `TAGLOOP_SESSION_DIR` (from the environment, then
/// `.env`), else the user's data folder. Every command that reads or writes sessions asks here.
pub fn session_dir(flag: Option<&Path>) -> PathBuf {
    flag.map(Path::to_path_buf)
        .or_else(|| {
            super::config::Sources::load(None)
                .ok()
                .and_then(|s| s.var("TAGLOOP_SESSION_DIR"))
                .map(PathBuf::from)
        })
        .unwrap_or_else(tagloop::session::default_dir)
}

/// Transcript options of the commands that run many tasks (`batch`, `eval`).
#[derive(Debug, Clone, Default, Args)]
pub struct SessionArgs {
    /// Where transcripts are written [default: the user's data dir] [env: TAGLOOP_SESSION_DIR]
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,
    /// Write no transcripts
    #[arg(long)]
    pub no_sessions: bool,
}

impl SessionArgs {
    /// The folder transcripts go to, or `None` with `--no-sessions`.
    pub fn dir(&self) -> Option<PathBuf> {
        (!self.no_sessions).then(|| session_dir(self.session_dir.as_deref()))
    }
}
