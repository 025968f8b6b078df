//! The endpoint's settings ([`ServeConfig`]).

use std::path::PathBuf;
use std::time::Duration;

use super::thought::ThoughtMode;
use super::tool_format::ToolFormat;
use crate::llm::{Api, GrammarMode, GrammarSyntax};
use crate::policy::Policies;
use crate::secret::Secret;

/// Settings of the endpoint [`router`](super::router) serves. Build with [`ServeConfig::new`]
/// and change the fields you need.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeConfig {
    /// The upstream's base URL, including `/v1` (e.g. `http://127.0.0.1:8080/v1`).
    pub upstream: String,
    /// Whether the upstream is asked over `/chat/completions` or `/completions` (base models).
    pub api: Api,
    /// The model name sent upstream; `None` uses each request's `model`.
    pub model: Option<String>,
    /// The upstream's key: sent only to the upstream, never logged, never in an answer.
    pub upstream_key: Secret,
    /// The proxy's own key: when set, every request needs `Authorization: Bearer KEY` (401 else).
    pub api_key: Option<Secret>,
    /// Whether the upstream is sent the request's grammar (as `tagloop run --grammar`).
    pub grammar: GrammarMode,
    /// The grammar's syntax for llama.cpp (as `tagloop run --grammar-syntax`): GBNF, or
    /// llguidance's Lark for a llama.cpp built with it (default GBNF).
    pub grammar_syntax: GrammarSyntax,
    /// The upstream's context window in tokens, when stated (as `tagloop run
    /// --context-window`); `None` (the default): learned from the upstream where it says it.
    /// Conversations are fitted into it (docs/serve.md, *Context fitting*).
    pub context_window: Option<u64>,
    /// How many times a turn that cannot be used is corrected upstream before the client gets
    /// a 502 (default 1).
    pub repairs: u32,
    /// Where a transcript of each answered request is written (one JSON file per request);
    /// `None`: none.
    pub session_dir: Option<PathBuf>,
    /// Largest request body, in bytes (default 4 MiB): 413 beyond.
    pub max_body: usize,
    /// Time limit per request (default 300 s): 504 beyond.
    pub timeout: Duration,
    /// Requests answered at once (default 16): further ones get 429 with `Retry-After: 1`.
    /// `GET /v1/models` takes a slot too, and a request takes its slot before its body is read.
    pub concurrency: usize,
    /// Time a client has to send a request's headers, and that a kept-alive connection may sit
    /// idle between requests (default 15 s); the connection is closed after it. Applies where
    /// the endpoint is served by [`serve`](super::serve).
    pub header_timeout: Duration,
    /// Time a client has to send a request's whole body (default 60 s): 408 beyond.
    pub body_timeout: Duration,
    /// Most connections open at once (default 512, and lowered to fit under the process's
    /// open-file limit); further ones wait in the listen queue until one closes. Applies where
    /// the endpoint is served by [`serve`](super::serve).
    pub max_connections: usize,
    /// Which format the upstream is asked in (default [`ToolFormat::Protocol`]; `Auto` asks
    /// in the model's own format where its chat template declares tools).
    pub tool_format: ToolFormat,
    /// Whether the upstream's turns that may call begin with a thought, in the protocol
    /// format (default [`ThoughtMode::None`]: left out of the grammar and the prompt;
    /// `Free` as in a run, docs/serve.md).
    pub thought: ThoughtMode,
    /// A time limit of serve's guess at the question's function of its own (under
    /// `tool_choice: auto`, a first call the grounding keeps is judged by the model's own guess,
    /// asked without the tools: `policy/guess.rs`). `None` (the default): the guess has what is left of
    /// the request's [`timeout`](Self::timeout), so a slow upstream delays the check but never
    /// skips it; `Some`: a guess that takes longer keeps the call unchecked, and the transcript
    /// says it timed out.
    pub guess_timeout: Option<Duration>,
    /// Whether what serve does not answer itself (embeddings, a model's lookup, uploads, the
    /// upstream server's own routes) passes through to the upstream (default `true`);
    /// `false`: 404 for it (docs/serve.md, *Pass-through*).
    pub passthrough: bool,
    /// Whether serve's own turns ask the upstream for streamed answers (default `true`);
    /// `false`: whole answers (an upstream behind a proxy that buffers or refuses streams). An
    /// upstream that refuses `stream` gets whole answers from then on anyway.
    pub upstream_stream: bool,
    /// Where serve keeps its data: the stored Responses (`responses.redb`, for `store` and
    /// `previous_response_id`). `None` (the library's default): kept in memory, lost when the
    /// process ends; `tagloop serve` passes `--data-dir`, by default a folder in the user's
    /// data directory.
    pub data_dir: Option<PathBuf>,
    /// A Redis that keeps the stored Responses instead of [`data_dir`](Self::data_dir), for
    /// several serve processes sharing one conversation space: `redis://[:PASSWORD@]HOST[:PORT][/DB]`
    /// (a secret: it may hold a password). `None` (the default): the embedded store. The same
    /// bounds hold; [`router`](crate::serve::router) fails when it cannot be reached.
    pub store_redis: Option<Secret>,
    /// The stored Responses' total size, in bytes (default 256 MiB): the oldest go first.
    pub store_max_bytes: u64,
    /// How long a stored Response is kept (default 30 days).
    pub store_max_age: Duration,
    /// The steering rules on (all by default; `crate::policy` lists them): serve's grounding,
    /// guess, further calls, choice, unsaid optional values, answered calls, no thought, and the counting and
    /// degeneration guards.
    pub policies: Policies,
}

impl ServeConfig {
    /// Defaults for an upstream URL: chat, the request's model name, no keys, grammar `auto`,
    /// no thought in a turn that may call, 1 repair, no transcripts, 4 MiB bodies, 300 s per request, 16
    /// at once, 15 s for headers (and idle connections), 60 s for a body, 512 connections, no
    /// time limit of the guess at a question's function besides the request's, pass-through on,
    /// stored Responses in memory (256 MiB, 30 days).
    pub fn new(upstream: impl Into<String>) -> Self {
        ServeConfig {
            upstream: upstream.into(),
            api: Api::Chat,
            model: None,
            upstream_key: Secret::default(),
            api_key: None,
            grammar: GrammarMode::Auto,
            grammar_syntax: GrammarSyntax::default(),
            context_window: None,
            repairs: 1,
            session_dir: None,
            max_body: 4 * 1024 * 1024,
            timeout: Duration::from_secs(300),
            concurrency: 16,
            header_timeout: Duration::from_secs(15),
            body_timeout: Duration::from_secs(60),
            max_connections: 512,
            tool_format: ToolFormat::default(),
            thought: ThoughtMode::default(),
            guess_timeout: None,
            passthrough: true,
            upstream_stream: true,
            data_dir: None,
            store_redis: None,
            store_max_bytes: 256 * 1024 * 1024,
            store_max_age: Duration::from_secs(30 * 24 * 3600),
            policies: Policies::all(),
        }
    }
}
