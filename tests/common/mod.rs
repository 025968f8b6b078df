//! Helpers shared by the integration tests (`mod common;`).
#![allow(dead_code)]

pub mod agent;
pub mod cli;
pub mod constrained;
pub mod fake_server;
pub mod lab;
pub mod openai;
pub mod py;
pub mod redis;
#[cfg(feature = "serve")]
pub mod responses;
pub mod script;
#[cfg(feature = "serve")]
pub mod serve;
pub mod serve_proc;
pub mod tools;

/// Serve `app` on a free loopback port, in the background: `http://127.0.0.1:PORT`.
pub async fn serve_on_loopback(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

/// The Rust MCP test server (`examples/mcp_test_server.rs`; `cargo test` builds it, or `cargo
/// build --example mcp_test_server`).
pub fn mcp_server_bin() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    let dir = exe.parent().and_then(|p| p.parent()).expect("target/debug");
    let bin = dir.join("examples").join("mcp_test_server");
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build --example mcp_test_server`",
        bin.display()
    );
    bin
}
