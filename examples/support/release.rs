//! Shared by the benchmark examples that drive the release binary as a child process.

use std::path::PathBuf;

/// `target/release/tagloop` beside the running example, or an error that says to build it.
pub fn tagloop_binary() -> Result<PathBuf, Box<dyn std::error::Error>> {
    let bin = std::env::current_exe()?
        .parent()
        .and_then(|p| p.parent())
        .map(|p| p.join("tagloop"))
        .ok_or("no binary dir")?;
    if !bin.is_file() {
        return Err(format!(
            "{} is missing: run `cargo build --release` first",
            bin.display()
        )
        .into());
    }
    Ok(bin)
}
