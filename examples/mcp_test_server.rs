//! A small MCP server over stdio, used by tagloop's tests and benchmarks (`tests/tools_mcp.rs`,
//! `benches/tools.rs`). `cargo test` builds it as `target/debug/examples/mcp_test_server`.
//!
//! Tools: `echo`, `add`, `ordered` (properties declared in non-alphabetical order), `env_var`, `fail`
//! (answers `is_error`), `slow` (sleeps), `crash` (exits at once), `garbage` (writes a non-JSON
//! line to stdout, then answers), all annotated `readOnlyHint: true`; and `write_note` (writes a
//! file, no annotation: tagloop must treat it as a writer).
//!
//! Flags: `--exit-at-start` (writes to stderr and exits 7 before speaking MCP), `--garbage-at-start`
//! (prints non-MCP text and waits), `--name NAME` (the server name it reports).

use std::io::Write;
use std::time::Duration;

use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// The text to send back.
    text: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    /// First number.
    a: i64,
    /// Second number.
    b: i64,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct OrderedArgs {
    /// Declared first.
    zeta: String,
    /// Declared second.
    alpha: String,
    /// Declared third.
    mid: i64,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct FailArgs {
    /// The error message to report.
    message: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct EnvArgs {
    /// The variable's name.
    name: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct NoteArgs {
    /// The file to write (absolute, or relative to the server's working directory).
    path: String,
    /// The text to write.
    text: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct SlowArgs {
    /// How long to sleep, in milliseconds.
    ms: u64,
}

#[derive(Debug, Clone)]
struct TestServer {
    name: String,
    #[allow(dead_code)]
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl TestServer {
    #[tool(description = "Echo the text back", annotations(read_only_hint = true))]
    fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }

    #[tool(description = "Add two integers", annotations(read_only_hint = true))]
    fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> String {
        (a + b).to_string()
    }

    #[tool(
        description = "Show the arguments in the order zeta, alpha, mid",
        annotations(read_only_hint = true)
    )]
    fn ordered(
        &self,
        Parameters(OrderedArgs { zeta, alpha, mid }): Parameters<OrderedArgs>,
    ) -> String {
        format!("zeta={zeta} alpha={alpha} mid={mid}")
    }

    #[tool(
        description = "The value of an environment variable of the server process",
        annotations(read_only_hint = true)
    )]
    fn env_var(&self, Parameters(EnvArgs { name }): Parameters<EnvArgs>) -> String {
        std::env::var(&name).unwrap_or_else(|_| format!("{name} is not set"))
    }

    #[tool(
        description = "Always fails with the given message",
        annotations(read_only_hint = true)
    )]
    fn fail(&self, Parameters(FailArgs { message }): Parameters<FailArgs>) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(message)])
    }

    #[tool(description = "Sleep, then answer", annotations(read_only_hint = true))]
    async fn slow(&self, Parameters(SlowArgs { ms }): Parameters<SlowArgs>) -> String {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        format!("slept {ms} ms")
    }

    #[tool(
        description = "Exit the server process at once",
        annotations(read_only_hint = true)
    )]
    fn crash(&self) -> String {
        eprintln!("mcp_test_server: crashing on purpose");
        std::process::exit(3);
    }

    #[tool(description = "Write text to a file (changes the disk; no read-only annotation)")]
    fn write_note(
        &self,
        Parameters(NoteArgs { path, text }): Parameters<NoteArgs>,
    ) -> CallToolResult {
        match std::fs::write(&path, text) {
            Ok(()) => CallToolResult::success(vec![ContentBlock::text(format!("wrote {path}"))]),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!("{path}: {e}"))]),
        }
    }

    #[tool(
        description = "Write a line that is not JSON-RPC to stdout, then answer",
        annotations(read_only_hint = true)
    )]
    fn garbage(&self) -> String {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(b"this is not json {{{\n");
        let _ = out.flush();
        "answered after garbage".to_string()
    }
}

#[tool_handler]
impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(self.name.clone(), "0.1.0"))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--exit-at-start") {
        eprintln!("mcp_test_server: refusing to start (as asked)");
        std::process::exit(7);
    }
    if args.iter().any(|a| a == "--garbage-at-start") {
        println!("hello, I am not an MCP server");
        tokio::time::sleep(Duration::from_secs(60)).await;
        return Ok(());
    }
    let name = args
        .iter()
        .position(|a| a == "--name")
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| "tagloop-test".to_string());
    let server = TestServer {
        name,
        tool_router: TestServer::tool_router(),
    };
    let running = server.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}
