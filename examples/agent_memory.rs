//! Peak memory of many concurrent 5-step episodes on the scripted model (BENCHMARKS.md).
//!
//! cargo run --release --example agent_memory -- 10000

use std::sync::Arc;

use tagloop::agent::Agent;
use tagloop::llm::{Script, ScriptedModel};
use tagloop::tools::{Registry, tool_fn};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    path: String,
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_string)
        })
        .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let mut text = String::new();
    for i in 0..5 {
        text.push_str(&format!(
            "=== turn ===\n<thought>Step {i}.</thought>\n<action>slow_read(path=\"f{i}.txt\")</action>\n"
        ));
    }
    text.push_str("=== turn ===\n<final_answer>done</final_answer>\n");
    let script = Arc::new(Script::parse(&text)?);
    let mut tools = Registry::new();
    // The tool yields for a while, so all episodes are alive at once.
    tools.add(Arc::new(tool_fn(
        "slow_read",
        "Read slowly.",
        |a: Args| async move {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            Ok(format!("contents of {}", a.path))
        },
    )));
    let before = peak_rss_kib();
    let started = std::time::Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        let agent = Agent::builder(Arc::new(ScriptedModel::new(script.clone())))
            .tools(tools.clone())
            .build()?;
        set.spawn(async move { agent.run("Read the five files.").await.status });
    }
    let mut ok = 0;
    while let Some(r) = set.join_next().await {
        if r? == tagloop::agent::Status::Ok {
            ok += 1;
        }
    }
    let peak = peak_rss_kib();
    println!(
        "{n} concurrent 5-step episodes: {ok} ok in {:.2} s; peak RSS {:.1} MiB (baseline {:.1} MiB), {:.1} KiB per episode",
        started.elapsed().as_secs_f64(),
        peak as f64 / 1024.0,
        before as f64 / 1024.0,
        (peak.saturating_sub(before)) as f64 / n as f64
    );
    Ok(())
}
