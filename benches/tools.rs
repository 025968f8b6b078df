//! Built-in tool speed next to the usual command-line tools, and the MCP round trip.
//!
//! ```text
//! cargo build --release --example mcp_test_server   # for the MCP group (else it is skipped)
//! cargo bench --bench tools
//! ```
//!
//! Groups:
//! - `search_10k`: `search_files` over a generated tree of 10,000 files (100 folders × 100 files,
//!   ~1.2 KB each, 100 matching lines), beside `grep -rn` (and `rg -n` when installed) on the same
//!   tree, timed in the same run.
//! - `read_10mb`: `read_file` of a 10 MB text file: default call (cut at the 256 KiB cap), the
//!   whole file (cap raised to 16 MiB), and a 100-line range from the middle; beside `cat` and
//!   `sed -n` doing the same.
//! - `mcp`: one trivial `echo` call through [`McpSource`] to the Rust test server.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Map, Value, json};
use tagloop::tools::{Limits, McpSource, Registry, ToolkitOptions, Workspace, toolkit};

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn make_tree(root: &Path) {
    for d in 0..100 {
        let dir = root.join(format!("dir{d:03}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..100 {
            let mut text = String::with_capacity(1300);
            for l in 0..30 {
                text.push_str(&format!("fn item_{d}_{f}_{l}() {{ let x = {l}; }}\n"));
            }
            if f == 42 {
                text.push_str(&format!("// NEEDLE_{d} found here\n"));
            }
            std::fs::write(dir.join(format!("file{f:03}.rs")), text).expect("write");
        }
    }
}

fn make_big_file(path: &Path) {
    let mut text = String::with_capacity(10 * 1024 * 1024 + 100);
    let mut i = 0u64;
    while text.len() < 10 * 1024 * 1024 {
        text.push_str(&format!(
            "{i:08} the quick brown fox jumps over the lazy dog\n"
        ));
        i += 1;
    }
    std::fs::write(path, text).expect("write");
}

fn registry(root: &Path, limits: Limits) -> Registry {
    let ws = Arc::new(Workspace::new(root).expect("workspace"));
    toolkit(
        ws,
        ToolkitOptions {
            limits,
            ..ToolkitOptions::default()
        },
    )
}

fn has(cmd: &str) -> bool {
    Command::new(cmd).arg("--version").output().is_ok()
}

fn search(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("tempdir");
    make_tree(tmp.path());
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let reg = registry(
        tmp.path(),
        Limits {
            search_max_matches: 100_000,
            ..Limits::default()
        },
    );
    let tool = reg.get("search_files").expect("tool").clone();
    // Same answer from both sides before timing anything.
    let ours = rt
        .block_on(tool.call(args(json!({"pattern": "NEEDLE_[0-9]+"}))))
        .expect("search");
    assert_eq!(ours.lines().count(), 100);
    let grep = Command::new("grep")
        .args(["-rnE", "NEEDLE_[0-9]+", "."])
        .current_dir(tmp.path())
        .output()
        .expect("grep");
    assert_eq!(String::from_utf8_lossy(&grep.stdout).lines().count(), 100);

    let mut g = c.benchmark_group("search_10k");
    g.sample_size(20).measurement_time(Duration::from_secs(10));
    g.bench_function("tagloop search_files", |b| {
        b.iter(|| {
            black_box(
                rt.block_on(tool.call(args(json!({"pattern": "NEEDLE_[0-9]+"}))))
                    .expect("search"),
            )
        })
    });
    g.bench_function("grep -rn", |b| {
        b.iter(|| {
            black_box(
                Command::new("grep")
                    .args(["-rnE", "NEEDLE_[0-9]+", "."])
                    .current_dir(tmp.path())
                    .output()
                    .expect("grep"),
            )
        })
    });
    if has("rg") {
        g.bench_function("rg -n", |b| {
            b.iter(|| {
                black_box(
                    Command::new("rg")
                        .args(["-n", "NEEDLE_[0-9]+", "."])
                        .current_dir(tmp.path())
                        .output()
                        .expect("rg"),
                )
            })
        });
    }
    g.finish();
}

fn read(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("big.txt");
    make_big_file(&file);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let capped = registry(tmp.path(), Limits::default());
    let whole = registry(
        tmp.path(),
        Limits {
            read_max_bytes: 16 * 1024 * 1024,
            ..Limits::default()
        },
    );
    let read_capped = capped.get("read_file").expect("tool").clone();
    let read_whole = whole.get("read_file").expect("tool").clone();
    let out = rt
        .block_on(read_whole.call(args(json!({"path": "big.txt"}))))
        .expect("read");
    assert!(out.len() >= 10 * 1024 * 1024);

    let mut g = c.benchmark_group("read_10mb");
    g.sample_size(20).measurement_time(Duration::from_secs(8));
    g.bench_function("tagloop read_file (default 256 KiB cap)", |b| {
        b.iter(|| black_box(rt.block_on(read_capped.call(args(json!({"path": "big.txt"}))))))
    });
    g.bench_function("tagloop read_file (whole 10 MB)", |b| {
        b.iter(|| black_box(rt.block_on(read_whole.call(args(json!({"path": "big.txt"}))))))
    });
    g.bench_function("tagloop read_file lines 100000-100099", |b| {
        b.iter(|| {
            black_box(rt.block_on(read_capped.call(args(
                json!({"path": "big.txt", "start_line": 100000, "end_line": 100099}),
            ))))
        })
    });
    g.bench_function("cat (whole 10 MB)", |b| {
        b.iter(|| black_box(Command::new("cat").arg(&file).output().expect("cat")))
    });
    g.bench_function("sed -n 100000,100099p", |b| {
        b.iter(|| {
            black_box(
                Command::new("sed")
                    .args(["-n", "100000,100099p;100099q"])
                    .arg(&file)
                    .output()
                    .expect("sed"),
            )
        })
    });
    g.finish();
}

fn mcp_server() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let profile_dir = exe.parent()?.parent()?;
    let target = profile_dir.parent()?;
    for dir in [
        profile_dir.to_path_buf(),
        target.join("release"),
        target.join("debug"),
    ] {
        let bin = dir.join("examples").join("mcp_test_server");
        if bin.exists() {
            return Some(bin);
        }
    }
    None
}

fn mcp(c: &mut Criterion) {
    let Some(bin) = mcp_server() else {
        eprintln!(
            "skipping the mcp group: build the server first with `cargo build --release --example mcp_test_server`"
        );
        return;
    };
    eprintln!("mcp group uses {}", bin.display());
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let src = rt
        .block_on(McpSource::start(
            &format!("'{}'", bin.display()),
            Duration::from_secs(30),
        ))
        .expect("server starts");
    let echo = src
        .tools()
        .into_iter()
        .find(|t| t.name().ends_with(".echo"))
        .expect("echo");
    let mut g = c.benchmark_group("mcp");
    g.bench_function("echo round trip", |b| {
        b.iter(|| black_box(rt.block_on(echo.call(args(json!({"text": "ping"}))))))
    });
    g.bench_function("start + initialise + list + shutdown", |b| {
        b.iter(|| {
            rt.block_on(async {
                let s = McpSource::start(&format!("'{}'", bin.display()), Duration::from_secs(30))
                    .await
                    .expect("starts");
                s.shutdown().await;
            })
        })
    });
    g.finish();
    rt.block_on(src.shutdown());
}

criterion_group!(benches, search, read, mcp);
criterion_main!(benches);
