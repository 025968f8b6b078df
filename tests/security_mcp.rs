//! Issue 9, item 8: how the write and confirm gates apply to MCP tools, through the library (the
//! command line's side is in security_proc.rs). Every test here reproduces an attack that worked
//! before the fix.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use tagloop::tools::{Confirm, FixedConfirm};
use tagloop::tools::{McpAccess, McpOptions, McpSource, Tool, ToolError};

use common::mcp_server_bin;

// ---------------------------------------------------------------------------------------------
// Item 8: MCP tools and the gates.

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().expect("object")
}

async fn start(opts: McpOptions) -> McpSource {
    McpSource::start_with(&format!("'{}'", mcp_server_bin().display()), opts)
        .await
        .expect("test server starts")
}

fn find(src: &McpSource, name: &str) -> Option<Arc<dyn Tool>> {
    src.tools().into_iter().find(|t| t.name() == name)
}

/// Counts the questions and answers with a fixed answer.
struct Counting(AtomicUsize, bool);

impl Confirm for Counting {
    fn confirm<'a>(&'a self, _what: &'a str) -> BoxFuture<'a, bool> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(std::future::ready(self.1))
    }
}

#[tokio::test]
async fn an_mcp_write_tool_needs_allow_write() {
    let src = start(McpOptions::default()).await;
    assert!(find(&src, "tagloop_test.write_note").is_none());
    assert_eq!(src.withheld(), ["tagloop_test.write_note"]);
    // Tools the server annotates read-only are offered.
    assert!(find(&src, "tagloop_test.echo").is_some());
    src.shutdown().await;

    let dir = tempfile::tempdir().expect("tempdir");
    let note = dir.path().join("note.txt");
    let src = start(McpOptions {
        allow_write: true,
        ..McpOptions::default()
    })
    .await;
    let write = find(&src, "tagloop_test.write_note").expect("offered with allow_write");
    write
        .call(args(json!({"path": note.to_string_lossy(), "text": "hi"})))
        .await
        .expect("writes");
    assert_eq!(std::fs::read_to_string(&note).expect("note"), "hi");
    src.shutdown().await;
}

#[tokio::test]
async fn confirm_covers_mcp_write_tools_and_not_read_only_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let note = dir.path().join("note.txt");
    let no = Arc::new(Counting(AtomicUsize::new(0), false));
    let src = start(McpOptions {
        allow_write: true,
        confirm: Some(no.clone()),
        ..McpOptions::default()
    })
    .await;
    let write = find(&src, "tagloop_test.write_note").expect("offered");
    let out = write
        .call(args(json!({"path": note.to_string_lossy(), "text": "hi"})))
        .await;
    assert!(matches!(out, Err(ToolError::Refused(_))), "{out:?}");
    assert!(!note.exists(), "a declined MCP write ran");
    assert_eq!(no.0.load(Ordering::SeqCst), 1);
    let echo = find(&src, "tagloop_test.echo").expect("echo");
    assert_eq!(
        echo.call(args(json!({"text": "x"}))).await.expect("echo"),
        "x"
    );
    assert_eq!(
        no.0.load(Ordering::SeqCst),
        1,
        "a read-only tool was asked about"
    );
    src.shutdown().await;

    let src = start(McpOptions {
        allow_write: true,
        confirm: Some(Arc::new(FixedConfirm(true))),
        ..McpOptions::default()
    })
    .await;
    let write = find(&src, "tagloop_test.write_note").expect("offered");
    write
        .call(args(json!({"path": note.to_string_lossy(), "text": "yes"})))
        .await
        .expect("allowed");
    assert_eq!(std::fs::read_to_string(&note).expect("note"), "yes");
    src.shutdown().await;
}

#[tokio::test]
async fn the_user_marks_a_server_read_only_or_write() {
    let src = start(McpOptions {
        access: McpAccess::ReadOnly,
        ..McpOptions::default()
    })
    .await;
    assert!(find(&src, "tagloop_test.write_note").is_some());
    assert!(src.withheld().is_empty());
    src.shutdown().await;

    let src = start(McpOptions {
        access: McpAccess::Write,
        ..McpOptions::default()
    })
    .await;
    assert!(src.tools().is_empty(), "every tool counts as a writer");
    assert!(src.withheld().contains(&"tagloop_test.echo".to_string()));
    src.shutdown().await;
}
