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

use super::serve_config::{ServeSection, pick};
use super::usage::{UsageError, usage, usage_chain};

/// Answer OpenAI `tools` requests with `tool_calls` for any model, speaking tagloop's text
/// protocol to the upstream; requests without tools pass through unchanged.
///
/// `-h` lists the settings a user changes; `--help` adds the tuning knobs, which can also be
/// set in the `[serve]` section of `tagloop.toml` (docs/configuration.md). A flag wins over the
/// file, the file over the default.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The upstream's base URL, including `/v1` (e.g. http://127.0.0.1:8080/v1)
    #[arg(long, help_heading = "Upstream")]
    upstream: String,
    /// Ask the upstream over chat completions, or `/completions` for base models
    #[arg(long, value_parser = ["chat", "completions"], default_value = "chat", help_heading = "Upstream")]
    api: String,
    /// The model name sent upstream (default: each request's `model`)
    #[arg(long, help_heading = "Upstream")]
    model: Option<String>,
    /// The environment variable holding the upstream's key [default: OPENAI_API_KEY]
    #[arg(long, value_name = "NAME", help_heading = "Upstream")]
    upstream_key_env: Option<String>,
    /// The upstream's context window in tokens (default: learned from the upstream where it
    /// says it); conversations longer than it are fitted
    #[arg(
        long,
        value_name = "N",
        help_heading = "Upstream",
        hide_short_help = true
    )]
    context_window: Option<u64>,
    /// Constrain the upstream's turns with the request's grammar: auto (servers known to take
    /// one), on, off [default: auto]
    #[arg(
        long,
        value_name = "MODE",
        help_heading = "Upstream",
        hide_short_help = true
    )]
    grammar: Option<GrammarMode>,
    /// The grammar syntax sent to llama.cpp: gbnf, or llguidance for a llama.cpp built with
    /// -DLLAMA_LLGUIDANCE=ON (a build without it refuses such a grammar) [default: gbnf]
    #[arg(
        long,
        value_name = "SYNTAX",
        help_heading = "Upstream",
        hide_short_help = true
    )]
    grammar_syntax: Option<GrammarSyntax>,
    /// Where to listen; port 0 picks a free one (the line printed on stdout says which)
    #[arg(long, default_value = "127.0.0.1:8090", help_heading = "Clients")]
    listen: SocketAddr,
    /// The environment variable holding this proxy's own key (clients send it as a bearer
    /// token); required when listening beyond loopback
    #[arg(long, value_name = "NAME", help_heading = "Clients")]
    api_key_env: Option<String>,
    /// The config file whose `[serve]` section sets the knobs [default: ./tagloop.toml, then the
    /// user's config dir]
    #[arg(long, value_name = "FILE", help_heading = "Clients")]
    config: Option<PathBuf>,
    /// The format the upstream is asked in: protocol (tagloop's text protocol), native (the
    /// model's own `<tool_call>` format, from the chat template llama.cpp publishes in
    /// /props), auto (native where the template declares tools, the protocol elsewhere)
    /// [default: protocol]
    #[arg(
        long,
        value_name = "FORMAT",
        help_heading = "Decisions",
        hide_short_help = true
    )]
    tool_format: Option<ToolFormat>,
    /// Whether the upstream's turns that may call begin with a <thought> (protocol format):
    /// none (the grammar and the prompt leave it out; the answer after a declined call keeps
    /// its own; measured better and faster on BFCL), free (the model's own, taught by the
    /// prompt, as in a run) [default: none]
    #[arg(
        long,
        value_name = "MODE",
        help_heading = "Decisions",
        hide_short_help = true
    )]
    thought: Option<ThoughtMode>,
    /// Corrections of an unusable turn before the client gets a 502 [default: 1]
    #[arg(
        long,
        value_name = "N",
        help_heading = "Decisions",
        hide_short_help = true
    )]
    repairs: Option<u32>,
    /// Time limit in seconds of the guess at a question's function, past which the call goes
    /// out unchecked (default: none besides the request's --timeout)
    #[arg(
        long,
        value_name = "SECS",
        help_heading = "Decisions",
        hide_short_help = true
    )]
    guess_timeout: Option<u64>,
    /// Switch a steering rule off (grounding, guess, further, choose,
    /// unsaid-optional, answered-call, no-thought, counting, repeat; `tagloop policies` lists them): a name, a comma list, or `all`;
    /// repeatable; adds to the config file's `[policies] off`
    #[arg(
        long,
        value_name = "NAME",
        value_delimiter = ',',
        help_heading = "Decisions"
    )]
    policy_off: Vec<String>,
    /// Largest request body in bytes (413 beyond) [default: 4194304]
    #[arg(
        long,
        value_name = "BYTES",
        help_heading = "Limits",
        hide_short_help = true
    )]
    max_body: Option<usize>,
    /// Time limit per request in seconds (504 beyond) [default: 300]
    #[arg(
        long,
        value_name = "SECS",
        help_heading = "Limits",
        hide_short_help = true
    )]
    timeout: Option<u64>,
    /// Requests answered at once (429 with Retry-After beyond) [default: 16]
    #[arg(
        long,
        value_name = "N",
        help_heading = "Limits",
        hide_short_help = true
    )]
    concurrency: Option<usize>,
    /// Connections open at once (lowered to fit the open-file limit); more wait until one
    /// closes [default: 512]
    #[arg(
        long,
        value_name = "N",
        help_heading = "Limits",
        hide_short_help = true
    )]
    max_connections: Option<usize>,
    /// Answer only what serve understands (the faces, the model list): 404 for every other
    /// route, which by default passes through to the upstream (embeddings, uploads, /tokenize)
    #[arg(long, help_heading = "Clients")]
    no_passthrough: bool,
    /// Ask the upstream for whole answers, never streamed (an upstream behind a proxy that
    /// buffers or refuses streams); clients may still ask serve for streams
    #[arg(long, help_heading = "Upstream", hide_short_help = true)]
    no_stream: bool,
    /// Where serve keeps its data: the stored Responses (`store`, `previous_response_id`)
    /// [default: tagloop/serve in the user's data directory]
    #[arg(long, value_name = "DIR", help_heading = "Clients")]
    data_dir: Option<PathBuf>,
    /// Keep the stored Responses in this Redis instead of --data-dir, shared by every serve
    /// process given the same: redis://[:PASSWORD@]HOST[:PORT][/DB] (better in the variable, off
    /// the command line, when it holds a password)
    #[arg(
        long,
        value_name = "URL",
        env = "TAGLOOP_SERVE_STORE",
        hide_env_values = true,
        value_parser = |s: &str| Ok::<_, String>(Secret::new(s)),
        help_heading = "Clients"
    )]
    store: Option<Secret>,
    /// The stored Responses' total size in MiB; the oldest go first
    #[arg(
        long,
        value_name = "MIB",
        default_value_t = 256,
        help_heading = "Limits",
        hide_short_help = true
    )]
    store_max_mib: u64,
    /// How many days a stored Response is kept
    #[arg(
        long,
        value_name = "DAYS",
        default_value_t = 30,
        help_heading = "Limits",
        hide_short_help = true
    )]
    store_max_days: u64,
    /// Write one JSON transcript per answered request here
    #[arg(long, value_name = "DIR", help_heading = "Logging")]
    session_dir: Option<PathBuf>,
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
    let file = super::config::Sources::load(args.config.as_deref())
        .map_err(|e| usage_chain(&e))?
        .file;
    let mut cfg = ServeConfig::new(args.upstream.clone());
    let section = file.serve.unwrap_or_default();
    knobs(&mut cfg, args_knobs(&args), &section).map_err(|e| anyhow::Error::new(UsageError(e)))?;
    let file_off = file.policies.map(|p| p.off).unwrap_or_default();
    cfg.policies = super::policies::resolve(&args.policy_off, Some(&file_off))?;
    cfg.api = if args.api == "completions" {
        Api::Completions
    } else {
        Api::Chat
    };
    cfg.model = args.model;
    cfg.upstream_key = upstream_key;
    cfg.api_key = api_key;
    cfg.session_dir = args.session_dir;
    cfg.data_dir = args
        .data_dir
        .or_else(|| dirs::data_dir().map(|d| d.join("tagloop").join("serve")));
    cfg.store_redis = args.store;
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

/// The knobs as the flags give them (each `None` when not given).
fn args_knobs(args: &ServeArgs) -> Knobs {
    Knobs {
        grammar: args.grammar,
        grammar_syntax: args.grammar_syntax,
        context_window: args.context_window,
        tool_format: args.tool_format,
        thought: args.thought,
        repairs: args.repairs,
        max_body: args.max_body,
        timeout: args.timeout,
        guess_timeout: args.guess_timeout,
        concurrency: args.concurrency,
        max_connections: args.max_connections,
        no_passthrough: args.no_passthrough,
        no_stream: args.no_stream,
    }
}

/// The tuning knobs a flag may give.
struct Knobs {
    grammar: Option<GrammarMode>,
    grammar_syntax: Option<GrammarSyntax>,
    context_window: Option<u64>,
    tool_format: Option<ToolFormat>,
    thought: Option<ThoughtMode>,
    repairs: Option<u32>,
    max_body: Option<usize>,
    timeout: Option<u64>,
    guess_timeout: Option<u64>,
    concurrency: Option<usize>,
    max_connections: Option<usize>,
    /// `--no-passthrough` (a switch: given, it wins; absent, the file decides).
    no_passthrough: bool,
    /// `--no-stream` (a switch, as `--no-passthrough`).
    no_stream: bool,
}

/// Set `cfg`'s knobs: each flag, else the `[serve]` section's value, else the default.
fn knobs(cfg: &mut ServeConfig, flags: Knobs, file: &ServeSection) -> Result<(), String> {
    cfg.grammar = pick(
        flags.grammar,
        file.grammar.as_deref(),
        "grammar",
        GrammarMode::Auto,
    )?;
    cfg.grammar_syntax = pick(
        flags.grammar_syntax,
        file.grammar_syntax.as_deref(),
        "grammar_syntax",
        GrammarSyntax::Gbnf,
    )?;
    cfg.context_window = flags
        .context_window
        .or(file.context_window)
        .filter(|&n| n > 0);
    cfg.tool_format = pick(
        flags.tool_format,
        file.tool_format.as_deref(),
        "tool_format",
        ToolFormat::Protocol,
    )?;
    cfg.thought = pick(
        flags.thought,
        file.thought.as_deref(),
        "thought",
        ThoughtMode::None,
    )?;
    cfg.repairs = flags.repairs.or(file.repairs).unwrap_or(1);
    cfg.max_body = flags.max_body.or(file.max_body).unwrap_or(4 * 1024 * 1024);
    let timeout = flags.timeout.or(file.timeout).unwrap_or(300);
    cfg.timeout = Duration::from_secs(timeout.max(1));
    cfg.guess_timeout = flags
        .guess_timeout
        .or(file.guess_timeout)
        .map(|s| Duration::from_secs(s.max(1)));
    cfg.concurrency = flags.concurrency.or(file.concurrency).unwrap_or(16).max(1);
    cfg.max_connections = flags
        .max_connections
        .or(file.max_connections)
        .unwrap_or(512)
        .max(1);
    cfg.passthrough = !flags.no_passthrough && file.passthrough.unwrap_or(true);
    cfg.upstream_stream = !flags.no_stream && file.stream.unwrap_or(true);
    Ok(())
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
