//! `tagloop parse` (placeholder until the protocol branch lands).

use std::path::PathBuf;
use std::process::ExitCode;

/// `tagloop parse`.
#[derive(Debug, clap::Args)]
pub struct ParseArgs {
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
    /// A tool signature such as 'write_file(path, content)'; repeatable
    #[arg(long)]
    pub tool: Vec<String>,
    /// The turn (default: stdin)
    pub file: Option<PathBuf>,
}

pub fn run(args: &ParseArgs) -> anyhow::Result<ExitCode> {
    let _ = args;
    Ok(ExitCode::SUCCESS)
}
