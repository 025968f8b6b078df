//! `tagloop batch` against the loopback fake server, beside a raw HTTP client making the same
//! requests in the same run (BENCHMARKS.md).
//!
//! cargo build --release && cargo run --release --example batch_bench -- [TASKS] [CONCURRENCY]
//!
//! 1. A fake OpenAI-compatible server starts in this process; each request is answered by the
//!    step it is at, so every task is a 5-step episode (five different file-tool calls, then an answer).
//! 2. The release `tagloop batch` runs TASKS tasks at CONCURRENCY as a child process; its wall
//!    time, CPU time and peak memory are taken from the OS.
//! 3. The raw floor: the very request bodies tagloop sent, grouped by task, replayed with plain
//!    reqwest (streamed, the whole body read) at the same concurrency, each task's requests in order.

#[path = "../tests/common/fake_server/mod.rs"]
mod fake_server;
#[path = "support/release.rs"]
mod release;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Instant;

use fake_server::{FakeConfig, FakeServer};
use futures::StreamExt;
use serde_json::Value;

fn child_usage() -> (f64, u64) {
    // SAFETY: getrusage writes into the struct we pass.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        let cpu = ru.ru_utime.tv_sec as f64
            + ru.ru_utime.tv_usec as f64 / 1e6
            + ru.ru_stime.tv_sec as f64
            + ru.ru_stime.tv_usec as f64 / 1e6;
        (cpu, ru.ru_maxrss as u64)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The fake server in this process holds one socket per concurrent task: allow as many as the
    // hard limit (tagloop batch does the same for itself).
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
    let tasks: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let concurrency: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let bin = release::tagloop_binary()?;
    let rt = tokio::runtime::Runtime::new()?;
    let calls = [
        "list_dir(path=\".\")",
        "read_file(path=\"readme.txt\")",
        "search_files(pattern=\"hel+o\")",
        "list_dir(path=\".\", recursive=true)",
        "read_file(path=\"readme.txt\", start_line=1, end_line=1)",
    ];
    let mut turns: Vec<String> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| format!("<thought>Step {i}: look around.</thought>\n<action>{c}</action>"))
        .collect();
    turns.push(
        "<thought>Seen enough.</thought>\n<final_answer>The workspace has one file.</final_answer>"
            .into(),
    );
    let mut cfg = FakeConfig::turns(turns);
    cfg.by_step = true;
    cfg.chunk_bytes = 24;
    let server = rt.block_on(FakeServer::start(cfg));

    let dir = tempfile::tempdir()?;
    std::fs::create_dir(dir.path().join("ws"))?;
    std::fs::write(dir.path().join("ws/readme.txt"), "hello\n")?;
    let input: String = (0..tasks)
        .map(|i| format!("{{\"id\": {i}, \"task\": \"Task number {i}: look around.\"}}\n"))
        .collect();
    std::fs::write(dir.path().join("in.jsonl"), input)?;

    let started = Instant::now();
    let status = Command::new(&bin)
        .current_dir(dir.path())
        .args([
            "batch",
            "in.jsonl",
            "--out",
            "out.jsonl",
            "--concurrency",
            &concurrency.to_string(),
        ])
        .args([
            "--model",
            "fake",
            "--base-url",
            &server.base_url,
            "--workspace",
            "ws",
            "--session-dir",
            "sessions",
        ])
        .status()?;
    let wall = started.elapsed().as_secs_f64();
    let (cpu, maxrss_kib) = child_usage();
    let lines = std::fs::read_to_string(dir.path().join("out.jsonl"))?;
    let ok = lines
        .lines()
        .filter(|l| l.contains("\"status\":\"ok\""))
        .count();
    let steps: u64 = lines
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v["steps"].as_u64().unwrap_or(0))
        .sum();
    assert!(status.success(), "tagloop batch failed");

    // Group the recorded requests by task, in order.
    let mut by_task: BTreeMap<String, Vec<(usize, Value)>> = BTreeMap::new();
    for r in server.requests() {
        let msgs = r.body["messages"].as_array().cloned().unwrap_or_default();
        let task = msgs
            .get(1)
            .and_then(|m| m["content"].as_str())
            .unwrap_or("")
            .to_string();
        by_task
            .entry(task)
            .or_default()
            .push((msgs.len(), r.body.clone()));
    }
    let requests: usize = by_task.values().map(Vec::len).sum();
    let url = format!("{}/chat/completions", server.base_url);
    let client = reqwest::Client::new();
    let raw_started = Instant::now();
    rt.block_on(async {
        futures::stream::iter(by_task.into_values().map(|mut reqs| {
            reqs.sort_by_key(|(n, _)| *n);
            let client = client.clone();
            let url = url.clone();
            async move {
                for (_, body) in reqs {
                    let resp = client
                        .post(&url)
                        .json(&body)
                        .send()
                        .await
                        .expect("raw request");
                    let mut s = resp.bytes_stream();
                    while let Some(chunk) = s.next().await {
                        chunk.expect("raw body");
                    }
                }
            }
        }))
        .buffer_unordered(concurrency)
        .collect::<Vec<_>>()
        .await
    });
    let raw = raw_started.elapsed().as_secs_f64();

    println!(
        "tasks {tasks}, concurrency {concurrency}, ok {ok}, steps {steps}, requests {requests}"
    );
    println!(
        "tagloop batch: wall {wall:.2} s, {:.0} tasks/s, CPU {cpu:.2} s ({:.1} µs CPU per step), peak RSS {:.1} MiB",
        tasks as f64 / wall,
        cpu / steps.max(1) as f64 * 1e6,
        maxrss_kib as f64 / 1024.0
    );
    println!(
        "raw reqwest, same requests: wall {raw:.2} s; tagloop / raw = {:.2}",
        wall / raw
    );
    Ok(())
}
