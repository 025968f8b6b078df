//! The official filesystem MCP server (`@modelcontextprotocol/server-filesystem`, pinned in
//! `tests/mcp-node/package.json`) driven through tagloop.
//!
//! Install it with `scripts/setup-mcp-node.sh`. Without it this test prints a note and passes,
//! except when the environment variable `CI` is set: then it fails, so CI cannot skip it silently.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tagloop::tools::{McpSource, Tool, ToolError};

fn server_js() -> Option<PathBuf> {
    let js = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp-node/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    if js.exists() {
        return Some(js);
    }
    let msg = "the official MCP filesystem server is not installed: run scripts/setup-mcp-node.sh";
    if std::env::var_os("CI").is_some() {
        panic!("{msg} (CI is set, so this test does not skip)");
    }
    eprintln!("note: skipping tools_mcp_node: {msg}");
    None
}

fn find(src: &McpSource, suffixes: &[&str]) -> Arc<dyn Tool> {
    for s in suffixes {
        if let Some(t) = src
            .tools()
            .into_iter()
            .find(|t| t.name().ends_with(&format!(".{s}")))
        {
            return t;
        }
    }
    panic!(
        "none of {suffixes:?} among {:?}",
        src.tools()
            .iter()
            .map(|t| t.name().to_string())
            .collect::<Vec<_>>()
    );
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().expect("object")
}

#[tokio::test]
async fn official_filesystem_server_lists_reads_and_refuses() {
    let Some(js) = server_js() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(tmp.path()).expect("canonical");
    std::fs::write(root.join("hello.txt"), "hello from tagloop\nline 2\n").expect("write");
    std::fs::create_dir(root.join("sub")).expect("mkdir");

    let command = format!("node '{}' '{}'", js.display(), root.display());
    let src = McpSource::start(&command, Duration::from_secs(60))
        .await
        .expect("filesystem server starts");
    // SERVER comes from the server's initialisation, sanitised.
    assert!(!src.name().is_empty());
    assert!(
        src.name()
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_'),
        "{}",
        src.name()
    );
    let names: Vec<String> = src.tools().iter().map(|t| t.name().to_string()).collect();
    assert!(names.len() >= 5, "{names:?}");
    assert!(
        names
            .iter()
            .all(|n| n.starts_with(&format!("{}.", src.name()))),
        "{names:?}"
    );

    let read = find(&src, &["read_text_file", "read_file"]);
    let props = read.parameters()["properties"]
        .as_object()
        .expect("schema has properties");
    assert_eq!(props.keys().next().map(String::as_str), Some("path"));
    let out = read
        .call(args(
            json!({"path": root.join("hello.txt").to_string_lossy()}),
        ))
        .await
        .expect("read works");
    assert!(out.contains("hello from tagloop"), "{out}");

    let also_read_file = find(&src, &["read_file"]);
    let out = also_read_file
        .call(args(
            json!({"path": root.join("hello.txt").to_string_lossy()}),
        ))
        .await
        .expect("read_file works");
    assert!(out.contains("line 2"), "{out}");

    let list = find(&src, &["list_directory"]);
    let out = list
        .call(args(json!({"path": root.to_string_lossy()})))
        .await
        .expect("list works");
    assert!(out.contains("hello.txt") && out.contains("sub"), "{out}");

    // Outside its allowed directory the server refuses; that is an error observation, not a crash.
    let out = read.call(args(json!({"path": "/etc/hostname"}))).await;
    assert!(matches!(out, Err(ToolError::Failed(_))), "{out:?}");
    let out = list
        .call(args(json!({"path": root.to_string_lossy()})))
        .await;
    assert!(out.is_ok(), "server still usable: {out:?}");

    src.shutdown().await;
    assert!(!src.is_running());
}
