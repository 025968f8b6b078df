//! `tagloop serve`: the OpenAI-compatible endpoint (`tagloop::serve`) on a socket.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use tagloop::llm::{Api, GrammarMode, GrammarSyntax};
use tagloop::secret::Secret;
use tagloop::serve::{ServeConfig, ThoughtMode, ToolFormat};

use super::usage::{UsageError, usage};

/// Answer OpenAI `tools` requests with `tool_calls` for any model, speaking tagloop's text
/// protocol to the upstream; requests without tools pass through unchanged.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The upstream's base URL, including `/v1` (e.g. http://127.0.0.1:8080/v1)
    #[arg(long)]
    upstream: String,
    /// Ask the upstream over chat completions, or `/completions` for base models
    #[arg(long, value_parser = ["chat", "completions"], default_value = "chat")]
    api: String,
    /// The model name sent upstream (default: each request's `model`)
    #[arg(long)]
    model: Option<String>,
    /// Where to listen; port 0 picks a free one (the line printed on stdout says which)
    #[arg(long, default_value = "127.0.0.1:8090")]
    listen: SocketAddr,
    /// The environment variable holding this proxy's own key (clients send it as a bearer
    /// token); required when listening beyond loopback
    #[arg(long, value_name = "NAME")]
    api_key_env: Option<String>,
    /// The environment variable holding the upstream's key [default: OPENAI_API_KEY]
    #[arg(long, value_name = "NAME")]
    upstream_key_env: Option<String>,
    /// Constrain the upstream's turns with the request's grammar: auto (servers known to take
    /// one), on, off
    #[arg(long, default_value = "auto")]
    grammar: GrammarMode,
    /// The grammar syntax sent to llama.cpp: gbnf, or llguidance for a llama.cpp built with
    /// -DLLAMA_LLGUIDANCE=ON (a build without it refuses such a grammar)
    #[arg(long, value_name = "SYNTAX", default_value = "gbnf")]
    grammar_syntax: GrammarSyntax,
    /// The upstream's context window in tokens (default: learned from the upstream where it
    /// says it); conversations longer than it are fitted
    #[arg(long, value_name = "N")]
    context_window: Option<u64>,
    /// The format the upstream is asked in: protocol (tagloop's text protocol), native (the
    /// model's own `<tool_call>` format, from the chat template llama.cpp publishes in
    /// /props), auto (native where the template declares tools, the protocol elsewhere)
    #[arg(long, value_name = "FORMAT", default_value = "protocol")]
    tool_format: ToolFormat,
    /// Whether the upstream's turns that may call begin with a <thought> (protocol format):
    /// none (the grammar and the prompt leave it out; the answer after a declined call keeps
    /// its own; measured better and faster on BFCL), free (the model's own, taught by the
    /// prompt, as in a run)
    #[arg(long, value_name = "MODE", default_value = "none")]
    thought: ThoughtMode,
    /// Corrections of an unusable turn before the client gets a 502
    #[arg(long, default_value_t = 1)]
    repairs: u32,
    /// Write one JSON transcript per answered request here
    #[arg(long, value_name = "DIR")]
    session_dir: Option<PathBuf>,
    /// Largest request body in bytes (413 beyond)
    #[arg(long, value_name = "BYTES", default_value_t = 4 * 1024 * 1024)]
    max_body: usize,
    /// Time limit per request in seconds (504 beyond)
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    timeout: u64,
    /// Time limit in seconds of the guess at a question's function, past which the call goes
    /// out unchecked (default: none besides the request's --timeout)
    #[arg(long, value_name = "SECS")]
    guess_timeout: Option<u64>,
    /// Requests answered at once (429 with Retry-After beyond)
    #[arg(long, value_name = "N", default_value_t = 16)]
    concurrency: usize,
    /// Connections open at once (lowered to fit the open-file limit); more wait until one
    /// closes
    #[arg(long, value_name = "N", default_value_t = 512)]
    max_connections: usize,
    /// Where serve keeps its data: the stored Responses (`store`, `previous_response_id`)
    /// [default: tagloop/serve in the user's data directory]
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// The stored Responses' total size in MiB; the oldest go first
    #[arg(long, value_name = "MIB", default_value_t = 256)]
    store_max_mib: u64,
    /// How many days a stored Response is kept
    #[arg(long, value_name = "DAYS", default_value_t = 30)]
    store_max_days: u64,
}

/// A key from the environment variable `name`; a named variable that is unset or empty is a
/// usage error (the user asked for a key and would otherwise serve without one).
fn key_from(name: &str) -> Result<Secret, anyhow::Error> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => Ok(Secret::new(v.trim())),
        _ => Err(anyhow::Error::new(UsageError(format!(
            "the environment variable {name} is not set (or empty)"
        )))),
    }
}

/// Run the endpoint until SIGINT or SIGTERM, then finish the requests in flight.
pub async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let api_key = match &args.api_key_env {
        Some(name) => Some(key_from(name)?),
        None if !args.listen.ip().is_loopback() => {
            return Err(anyhow::Error::new(UsageError(format!(
                "listening on {} (beyond loopback) needs a key for this proxy: --api-key-env NAME",
                args.listen
            ))));
        }
        None => None,
    };
    let upstream_key = match &args.upstream_key_env {
        Some(name) => key_from(name)?,
        None => std::env::var("OPENAI_API_KEY")
            .map(Secret::new)
            .unwrap_or_default(),
    };
    let mut cfg = ServeConfig::new(args.upstream.clone());
    cfg.api = if args.api == "completions" {
        Api::Completions
    } else {
        Api::Chat
    };
    cfg.model = args.model;
    cfg.upstream_key = upstream_key;
    cfg.api_key = api_key;
    cfg.grammar = args.grammar;
    cfg.grammar_syntax = args.grammar_syntax;
    cfg.context_window = args.context_window.filter(|&n| n > 0);
    cfg.repairs = args.repairs;
    cfg.tool_format = args.tool_format;
    cfg.thought = args.thought;
    cfg.session_dir = args.session_dir;
    cfg.max_body = args.max_body;
    cfg.timeout = Duration::from_secs(args.timeout.max(1));
    cfg.guess_timeout = args.guess_timeout.map(|s| Duration::from_secs(s.max(1)));
    cfg.concurrency = args.concurrency.max(1);
    cfg.max_connections = args.max_connections.max(1);
    cfg.data_dir = args
        .data_dir
        .or_else(|| dirs::data_dir().map(|d| d.join("tagloop").join("serve")));
    cfg.store_max_bytes = args.store_max_mib.max(1).saturating_mul(1024 * 1024);
    cfg.store_max_age = Duration::from_secs(args.store_max_days.max(1).saturating_mul(86_400));
    // A bad upstream URL is the user's to fix, and is said before listening. The router is
    // dropped at once: it holds the response store's file, which the server opens again.
    drop(tagloop::serve::router(cfg.clone()).map_err(usage)?);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "tagloop serve: listening on http://{addr}")?;
        out.flush()?;
    }
    tagloop::serve::serve(listener, cfg, shutdown_signal())
        .await
        .context("the server stopped")?;
    Ok(ExitCode::SUCCESS)
}

/// Resolves at the first SIGINT or SIGTERM: the server then stops accepting and lets the requests in
/// flight finish.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::warn!("cannot install signal handlers; stop tagloop serve with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!("stopping: finishing the requests in flight");
}
