//! MCP sources against the Rust test server in `examples/mcp_test_server.rs` (built by `cargo test`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tagloop::tools::{McpError, McpOptions, McpSource, Registry, Tool, ToolError};

/// `target/debug/examples/mcp_test_server`, found from this test binary (`target/debug/deps/…`).
fn server_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    let dir = exe.parent().and_then(|p| p.parent()).expect("target/debug");
    let bin = dir.join("examples").join("mcp_test_server");
    assert!(
        bin.exists(),
        "{} is missing; a plain `cargo test` builds it (with `--test` filters run `cargo build --example mcp_test_server` first)",
        bin.display()
    );
    // `cargo test --test tools_mcp` alone does not rebuild examples: catch a stale server.
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mcp_test_server.rs");
    let modified = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(b), Some(s)) = (modified(&bin), modified(&src)) {
        assert!(
            b >= s,
            "{} is older than its source; run `cargo build --example mcp_test_server` (a plain `cargo test` does it)",
            bin.display()
        );
    }
    bin
}

fn cmd(extra: &str) -> String {
    format!("'{}' {extra}", server_bin().display())
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().expect("object")
}

fn tool(src: &McpSource, name: &str) -> Arc<dyn Tool> {
    src.tools()
        .into_iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

async fn start() -> McpSource {
    McpSource::start(&cmd(""), Duration::from_secs(20))
        .await
        .expect("test server starts")
}

#[tokio::test]
async fn lists_tools_named_server_dot_tool_with_their_schemas() {
    let src = start().await;
    assert_eq!(src.name(), "tagloop_test");
    let mut names: Vec<String> = src.tools().iter().map(|t| t.name().to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "tagloop_test.add",
            "tagloop_test.crash",
            "tagloop_test.echo",
            "tagloop_test.env_var",
            "tagloop_test.fail",
            "tagloop_test.garbage",
            "tagloop_test.ordered",
            "tagloop_test.slow",
        ]
    );
    let echo = tool(&src, "tagloop_test.echo");
    assert_eq!(echo.description(), "Echo the text back");
    assert_eq!(echo.parameters()["type"], "object");
    assert_eq!(echo.parameters()["properties"]["text"]["type"], "string");
    assert_eq!(echo.parameters()["required"], json!(["text"]));
    // Property order is the server's declaration order, not alphabetical.
    let ordered = tool(&src, "tagloop_test.ordered");
    let keys: Vec<&String> = ordered.parameters()["properties"]
        .as_object()
        .expect("properties")
        .keys()
        .collect();
    assert_eq!(keys, ["zeta", "alpha", "mid"]);
    // They go into a registry like any tool.
    let mut reg = Registry::new();
    for t in src.tools() {
        reg.add(t);
    }
    assert!(reg.get("tagloop_test.add").is_some());
    src.shutdown().await;
}

#[tokio::test]
async fn calls_return_text_and_errors_become_failures() {
    let src = start().await;
    let out = tool(&src, "tagloop_test.echo")
        .call(args(json!({"text": "héllo <b>"})))
        .await;
    assert_eq!(out, Ok("héllo <b>".to_string()));
    let out = tool(&src, "tagloop_test.add")
        .call(args(json!({"a": 2, "b": 40})))
        .await;
    assert_eq!(out, Ok("42".to_string()));
    let out = tool(&src, "tagloop_test.ordered")
        .call(args(json!({"zeta": "z", "alpha": "a", "mid": 3})))
        .await;
    assert_eq!(out, Ok("zeta=z alpha=a mid=3".to_string()));

    // is_error → Failed with the server's text.
    let out = tool(&src, "tagloop_test.fail")
        .call(args(json!({"message": "disk on fire"})))
        .await;
    assert_eq!(out, Err(ToolError::Failed("disk on fire".to_string())));

    // Bad arguments: the server's complaint comes back as a failure, and the server lives on.
    let out = tool(&src, "tagloop_test.add")
        .call(args(json!({"a": "not a number"})))
        .await;
    match out {
        Err(ToolError::Failed(msg)) => assert!(!msg.is_empty()),
        other => panic!("expected a failure, got {other:?}"),
    }
    let out = tool(&src, "tagloop_test.add")
        .call(args(json!({"a": 1, "b": 1})))
        .await;
    assert_eq!(out, Ok("2".to_string()));
    src.shutdown().await;
}

#[tokio::test]
async fn a_slow_call_times_out_and_the_server_stays_usable() {
    let src = McpSource::start_with(
        &cmd(""),
        McpOptions {
            call_timeout: Duration::from_millis(300),
            ..McpOptions::default()
        },
    )
    .await
    .expect("starts");
    let out = tool(&src, "tagloop_test.slow")
        .call(args(json!({"ms": 5000})))
        .await;
    assert_eq!(out, Err(ToolError::Timeout(Duration::from_millis(300))));
    let out = tool(&src, "tagloop_test.slow")
        .call(args(json!({"ms": 10})))
        .await;
    assert_eq!(out, Ok("slept 10 ms".to_string()));
    src.shutdown().await;
}

#[tokio::test]
async fn a_crash_fails_that_call_and_every_later_one_clearly() {
    let src = start().await;
    let crash = tool(&src, "tagloop_test.crash");
    let out = crash.call(Map::new()).await;
    let msg = match out {
        Err(ToolError::Failed(m)) => m,
        other => panic!("expected a failure, got {other:?}"),
    };
    assert!(msg.contains("not running"), "{msg}");
    let out = tool(&src, "tagloop_test.echo")
        .call(args(json!({"text": "still there?"})))
        .await;
    let msg = match out {
        Err(ToolError::Failed(m)) => m,
        other => panic!("expected a failure, got {other:?}"),
    };
    assert!(
        msg.contains("tagloop_test") && msg.contains("not running"),
        "{msg}"
    );
    assert!(
        msg.contains("crashing on purpose"),
        "stderr tail missing: {msg}"
    );
    assert!(!src.is_running());
    src.shutdown().await;
}

#[tokio::test]
async fn a_garbage_line_does_not_kill_the_session() {
    let src = start().await;
    let out = tool(&src, "tagloop_test.garbage").call(Map::new()).await;
    // rmcp skips a line that is not JSON-RPC; whichever way it goes, the run goes on.
    match &out {
        Ok(text) => assert_eq!(text, "answered after garbage"),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    let out = tool(&src, "tagloop_test.echo")
        .call(args(json!({"text": "after"})))
        .await;
    assert_eq!(out, Ok("after".to_string()), "(garbage gave {out:?})");
    src.shutdown().await;
}

#[tokio::test]
async fn shutdown_stops_the_server_and_later_calls_say_so() {
    let src = start().await;
    let echo = tool(&src, "tagloop_test.echo");
    assert!(src.is_running());
    src.shutdown().await;
    assert!(!src.is_running());
    let out = echo.call(args(json!({"text": "x"}))).await;
    assert_eq!(
        out,
        Err(ToolError::Failed(
            "MCP server `tagloop_test` was shut down".to_string()
        ))
    );
    // Idempotent.
    src.shutdown().await;
}

fn process_alive(pid: i32) -> bool {
    // A zombie waiting for its parent's wait() counts as gone.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn server_pids() -> Vec<i32> {
    let bin = server_bin();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(exe) = std::fs::read_link(entry.path().join("exe"))
            && exe == bin
            && process_alive(pid)
        {
            pids.push(pid);
        }
    }
    pids
}

#[tokio::test]
async fn dropping_the_source_and_its_tools_stops_the_server() {
    // A unique name lets us find this server's process among the other tests' servers.
    let src = McpSource::start_with(&cmd("--name drop-test"), McpOptions::default())
        .await
        .expect("starts");
    assert_eq!(src.name(), "drop_test");
    let before = server_pids();
    assert!(!before.is_empty());
    // Find the pid whose cmdline mentions drop-test.
    let ours: Vec<i32> = before
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains("drop-test"))
                .unwrap_or(false)
        })
        .collect();
    assert_eq!(ours.len(), 1, "{ours:?}");
    drop(src);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while process_alive(ours[0]) {
        assert!(
            std::time::Instant::now() < deadline,
            "server {} still running after drop",
            ours[0]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn start_failures_are_clear_errors() {
    // Program not found.
    let err = McpSource::start("/nonexistent/mcp-server --x", Duration::from_secs(5))
        .await
        .expect_err("no such program");
    assert!(matches!(err, McpError::Spawn { .. }), "{err}");
    assert!(err.to_string().contains("/nonexistent/mcp-server"), "{err}");

    // Bad quoting.
    let err = McpSource::start("node 'unterminated", Duration::from_secs(5))
        .await
        .expect_err("bad quoting");
    assert!(matches!(err, McpError::CommandLine { .. }), "{err}");
    let err = McpSource::start("   ", Duration::from_secs(5))
        .await
        .expect_err("empty");
    assert!(matches!(err, McpError::CommandLine { .. }), "{err}");

    // Exits before initialising: the error carries its stderr.
    let err = McpSource::start(&cmd("--exit-at-start"), Duration::from_secs(10))
        .await
        .expect_err("exits");
    assert!(matches!(err, McpError::Initialize { .. }), "{err}");
    assert!(err.to_string().contains("refusing to start"), "{err}");

    // Talks garbage instead of MCP: no hang beyond the start timeout.
    let t0 = std::time::Instant::now();
    let err = McpSource::start(&cmd("--garbage-at-start"), Duration::from_secs(2))
        .await
        .expect_err("garbage");
    assert!(
        matches!(
            err,
            McpError::StartTimeout { .. } | McpError::Initialize { .. }
        ),
        "{err}"
    );
    assert!(t0.elapsed() < Duration::from_secs(8));
}

#[tokio::test]
async fn name_override_and_command_file_name() {
    let src = McpSource::start_with(
        &cmd(""),
        McpOptions {
            name: Some("my tools!".to_string()),
            ..McpOptions::default()
        },
    )
    .await
    .expect("starts");
    assert_eq!(src.name(), "my_tools_");
    assert!(
        src.tools()
            .iter()
            .all(|t| t.name().starts_with("my_tools_."))
    );
    src.shutdown().await;
}

#[tokio::test]
async fn env_assignments_reach_the_server() {
    let src = McpSource::start(
        &format!("TAGLOOP_MCP_PROBE='a b' {}", cmd("")),
        Duration::from_secs(20),
    )
    .await
    .expect("starts with an env assignment");
    let out = tool(&src, "tagloop_test.env_var")
        .call(args(json!({"name": "TAGLOOP_MCP_PROBE"})))
        .await;
    assert_eq!(out, Ok("a b".to_string()));
    src.shutdown().await;
}

#[tokio::test]
async fn the_server_environment_follows_child_env_and_explicit_values() {
    let home = std::env::var("HOME").unwrap_or_default();
    let value_of = |src: &McpSource, name: &str| {
        let t = tool(src, "tagloop_test.env_var");
        let name = name.to_string();
        async move { t.call(args(json!({ "name": name }))).await }
    };
    // By name.
    let src = McpSource::start_with(
        &cmd(""),
        McpOptions {
            env: tagloop::tools::ChildEnv::new().remove("HOME"),
            ..McpOptions::default()
        },
    )
    .await
    .expect("starts");
    assert_eq!(
        value_of(&src, "HOME").await,
        Ok("HOME is not set".to_string())
    );
    src.shutdown().await;
    // By value: a variable holding a secret goes, whatever its name.
    if home.len() >= 8 {
        let src = McpSource::start_with(
            &cmd(""),
            McpOptions {
                env: tagloop::tools::ChildEnv::new().secret(home.clone()),
                ..McpOptions::default()
            },
        )
        .await
        .expect("starts");
        assert_eq!(
            value_of(&src, "HOME").await,
            Ok("HOME is not set".to_string())
        );
        src.shutdown().await;
    }
    // What the user passes explicitly arrives, even a name the rules remove.
    let src = McpSource::start_with(
        &cmd(""),
        McpOptions {
            env: tagloop::tools::ChildEnv::new().set("OPENAI_API_KEY", "given-on-purpose"),
            ..McpOptions::default()
        },
    )
    .await
    .expect("starts");
    assert_eq!(
        value_of(&src, "OPENAI_API_KEY").await,
        Ok("given-on-purpose".to_string())
    );
    src.shutdown().await;
}
