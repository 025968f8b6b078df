//! Peak memory of one built-in tool call, for BENCHMARKS.md's memory table ("Memory bounds" in
//! docs/experiments.md).
//!
//! `cargo run --release --example tool_rss -- WORKSPACE TOOL 'JSON-ARGS'` runs the tool once with
//! writes allowed and prints the observation's size and the process's peak resident set size
//! (`VmHWM` from `/proc/self/status`, Linux only).

use std::sync::Arc;

use tagloop::tools::{ToolkitOptions, Workspace, toolkit};

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut argv = std::env::args().skip(1);
    let usage = "usage: tool_rss WORKSPACE TOOL JSON-ARGS";
    let root = argv.next().ok_or_else(|| anyhow::anyhow!(usage))?;
    let name = argv.next().ok_or_else(|| anyhow::anyhow!(usage))?;
    let args: serde_json::Value =
        serde_json::from_str(&argv.next().unwrap_or_else(|| "{}".into()))?;
    let ws = Arc::new(Workspace::new(root)?);
    let reg = toolkit(
        ws,
        ToolkitOptions {
            allow_write: true,
            ..ToolkitOptions::default()
        },
    );
    let tool = reg
        .get(&name)
        .ok_or_else(|| anyhow::anyhow!("no tool {name}"))?;
    let obj = args.as_object().cloned().unwrap_or_default();
    let (ok, text) = match tool.call(obj).await {
        Ok(t) => (true, t),
        Err(e) => (false, e.to_string()),
    };
    let tail: String = text
        .chars()
        .rev()
        .take(200)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    println!(
        "{name}: ok={ok} observation={} bytes peak_rss={} KiB\n  …{}",
        text.len(),
        peak_rss_kib().map_or("?".to_string(), |k| k.to_string()),
        tail.replace('\n', "\\n")
    );
    Ok(())
}
