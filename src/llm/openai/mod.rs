//! The OpenAI-compatible client: `/chat/completions` and `/completions`, streaming or not, on
//! OpenAI, Ollama, llama.cpp's `llama-server`, vLLM, TGI, LM Studio and gateways in front of them.
//!
//! # How it is built
//!
//! * **One HTTP stack**: every request (streamed or whole, chat or completions, the server
//!   probes, http or https, through a proxy or not) goes over one `reqwest::Client`, which
//!   follows no redirect (a `3xx` is an error naming where the server points: following it
//!   would carry the key there).
//! * **One request path**: a turn, whole or streamed, is one `POST` (`send.rs`) whose body serde
//!   writes straight from the messages (a JSON map of fields beside them: the token-limit field
//!   name is configurable and vendor fields are merged in). A whole answer is read up to its cap
//!   and by serde into our lenient response type (`WireChunk`: every field `#[serde(default)]`,
//!   `finish_reason` a plain string, `reasoning_content`/`reasoning` kept); a streamed one is
//!   read from reqwest's byte stream, `eventsource-stream` framing the events and serde reading
//!   each chunk. Dropping the answer at the first stop closes the connection, so the server
//!   stops generating.
//! * **Non-2xx answers are read by us** (`crate::upstream`), so the HTTP status, `Retry-After` and
//!   `Location` survive error bodies that are not OpenAI-shaped (Ollama's `{"error":"…"}`,
//!   llama.cpp's integer `code`, HTML from a proxy). One place (`errors.rs`) maps every
//!   failure to [`LlmError`].
//! * **Every body has a cap**: 1 MiB for error bodies and probe answers, 16 MiB for a whole
//!   answer, 1 MiB for one server-sent event, and what a turn keeps is capped by its token
//!   budget (see "Caps" below).
//! * **Retries are ours**: exponential backoff with jitter (`backon`'s builder), for connection
//!   errors, read timeouts, 408, 429 (honouring `Retry-After`, capped) and 5xx, a bounded number
//!   of times, and only while no text has been passed to the caller (a retry never repeats
//!   deltas). Other 4xx (and every 3xx) are never retried.
//! * **Timeouts**: `connect_timeout` and `read_timeout` (idle time between bytes) on the HTTP
//!   client, never a whole-request timeout (it would kill long streams), and a wall-clock
//!   `turn_timeout` around the whole turn, retries included.
//!
//! # Stops
//!
//! At most four stop strings are sent (`send_stop`); all of them are enforced on our side by a
//! [`StopScanner`](crate::llm::StopScanner) over the streamed text, so whatever the server does the caller sees the same
//! thing: the text before the first stop, no partial stop string, and [`Finish::Stop`](crate::llm::Finish::Stop) naming it.
//!
//! * Server kept the stop (TGI) or ignored `stop`: the scanner cuts it → [`Enforcer::Client`](crate::llm::Enforcer::Client).
//! * Server stripped the stop (OpenAI, vLLM, llama.cpp): `finish_reason: "stop"`. Which stop
//!   fired comes from vLLM's `stop_reason` when present, else from a trailing partial stop the
//!   server flushed (llama.cpp), else it is inferred as the closing tag of the latest unclosed
//!   element (`</action>` when an `<action>` is open); when nothing fits, the turn ends as
//!   [`Finish::End`](crate::llm::Finish::End) → [`Enforcer::Server`](crate::llm::Enforcer::Server) whenever a stop is named.
//! * Server rejected `stop` (HTTP 400 whose body names `stop`, e.g. OpenAI reasoning models):
//!   the turn is asked again without stops, and the model remembers it for its lifetime.
//!
//! # Grammars
//!
//! A request that carries a [`TurnGrammar`](crate::llm::TurnGrammar) has it sent in the server's own field when
//! the mode allows (`auto`: llama.cpp, vLLM and SGLang, detected once per client or stated in
//! the config; `on`: every server not known to lack grammars; `off`: never). A lazy grammar is
//! used on llama.cpp when the request offers one. A server that answers 400 naming the grammar
//! field is asked again without it, and the client never sends one again (like `stop`). With
//! [`GrammarSyntax::Llguidance`] stated, llama.cpp gets the grammar in llguidance's Lark form
//! (whole-turn grammars; lazy ones stay GBNF); a 400 naming the grammar then falls back to GBNF
//! for the client's life, before grammars are given up. Which
//! way a turn went is [`TurnResult::constraint`](crate::llm::TurnResult::constraint).
//!
//! # Usage and reasoning
//!
//! `stream_options.include_usage` is sent on streamed requests when `include_usage` is on; the
//! usage chunk is read if it arrives. A turn whose stream we dropped (a client-side stop, the
//! degeneration guard) never gets it: its completion tokens are estimated from the bytes
//! received (4 bytes a token) and its prompt tokens stay zero. `reasoning_content` /
//! `reasoning` deltas are collected separately.
//!
//! # Caps
//!
//! What one turn keeps, text and reasoning together, is capped at 16 bytes per token of the
//! request's `max_tokens`, or 4 MiB without one: a server that runs on past the limit (or
//! without one) has its stream dropped there, as at a stop, and the turn ends as
//! [`Finish::Length`](crate::llm::Finish::Length).
//!
//! # Degeneration
//!
//! Unless the request sets `keep_repetitions`, a [`RepeatGuard`](crate::llm::RepeatGuard) watches the text as it
//! arrives; when its tail repeats one unit over and over, the stream is dropped at once (the
//! server stops generating, as for a stop) and the turn ends as [`Finish::Repeated`](crate::llm::Finish::Repeated), its text
//! cut after the first unit.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::{
    DeltaSink, GrammarMode, GrammarSyntax, LlmError, Model, Prompt, ServerKind, TurnFuture,
    TurnRequest,
};

use super::Api;
use crate::secret::{Redactor, Secret};

mod attempt;
mod attempt_error;
mod body;
mod client;
mod ending;
mod errors;
mod grammar;
mod retry;
mod send;
mod server;
mod state;
mod stream;
#[cfg(test)]
mod tests;
mod wire;

use crate::upstream::Upstream;

/// Settings of an [`OpenAiModel`].
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Base URL including the version path, e.g. `http://127.0.0.1:11434/v1` (trailing `/` and a
    /// pasted `/chat/completions` are removed).
    pub base_url: String,
    /// Bearer key; may be empty for local servers. Never printed.
    pub api_key: Secret,
    /// Chat or plain completions.
    pub api: Api,
    /// Model name.
    pub model: String,
    /// Limit for establishing the connection.
    pub connect_timeout: Duration,
    /// Limit for silence between received bytes (not for the whole answer).
    pub read_timeout: Duration,
    /// Wall-clock limit for a whole turn, retries included (`None`: no limit).
    pub turn_timeout: Option<Duration>,
    /// Retries after the first attempt for transient failures.
    pub max_retries: u32,
    /// First backoff delay.
    pub retry_min_delay: Duration,
    /// Largest backoff delay.
    pub retry_max_delay: Duration,
    /// Largest `Retry-After` honoured.
    pub retry_after_cap: Duration,
    /// Stream the answer (SSE). Off: whole answers (a server behind a buffering proxy); a
    /// server that refuses `stream` turns it off for the client's life anyway.
    pub stream: bool,
    /// Idle connections kept per server for the next request (default 8); serve keeps one per
    /// request it answers at once. See `crate::upstream::pooled`.
    pub pool_idle_per_host: usize,
    /// Send the stop strings to the server (they are enforced on our side anyway).
    pub send_stop: bool,
    /// Ask for usage in the stream (`stream_options.include_usage`); some proxies reject it.
    pub include_usage: bool,
    /// Chat prompts that end with an assistant message are continued by the server. llama.cpp
    /// (stated, or detected by the grammar's probe) is taken to continue them without it.
    pub prefill: bool,
    /// Body field for the token limit (`max_tokens`, or `max_completion_tokens`).
    pub token_field: String,
    /// Extra body fields for every request (vendor options); a request's own `extra` wins.
    pub extra: Map<String, Value>,
    /// Extra HTTP headers for every request.
    pub headers: Vec<(String, String)>,
    /// Whether to send the turn's grammar (see the module docs).
    pub grammar: GrammarMode,
    /// The server's kind as stated by the user; `None`: detected on first use.
    pub server: Option<ServerKind>,
    /// The grammar syntax llama.cpp is sent (see [`GrammarSyntax`]): GBNF unless the user
    /// states that the server has llguidance.
    pub grammar_syntax: GrammarSyntax,
    /// The model's context window in tokens, as stated by the user; `None`: learned from the
    /// server before the first run (`crate::upstream`), when it says. A stated window makes no probe.
    pub context_window: Option<u64>,
}

impl OpenAiConfig {
    /// Defaults for a base URL and a model: chat, streaming, stops sent, usage asked for,
    /// connect 10 s, read 120 s, turn 600 s, 3 retries from 500 ms up to 8 s, `Retry-After`
    /// capped at 30 s, token field `max_tokens`.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key: Secret::default(),
            api: Api::Chat,
            model: model.into(),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(120),
            turn_timeout: Some(Duration::from_secs(600)),
            max_retries: 3,
            retry_min_delay: Duration::from_millis(500),
            retry_max_delay: Duration::from_secs(8),
            retry_after_cap: Duration::from_secs(30),
            stream: true,
            pool_idle_per_host: 8,
            send_stop: true,
            include_usage: true,
            prefill: false,
            token_field: "max_tokens".to_owned(),
            extra: Map::new(),
            headers: Vec::new(),
            grammar: GrammarMode::Auto,
            server: None,
            grammar_syntax: GrammarSyntax::Gbnf,
            context_window: None,
        }
    }
}

/// Normalise a user-supplied base URL: trim, drop trailing `/` and a pasted endpoint path.
pub fn normalize_base_url(raw: &str) -> Result<String, LlmError> {
    let mut s = raw.trim().trim_end_matches('/').to_owned();
    for suffix in ["/chat/completions", "/completions"] {
        if let Some(stripped) = s.strip_suffix(suffix) {
            s = stripped.trim_end_matches('/').to_owned();
        }
    }
    let url = reqwest::Url::parse(&s).map_err(|e| {
        LlmError::Config(format!(
            "base URL '{s}' is not a URL ({e}); expected e.g. http://127.0.0.1:11434/v1"
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(LlmError::Config(format!(
            "base URL '{s}' must start with http:// or https://"
        )));
    }
    Ok(s)
}

/// A model behind an OpenAI-compatible HTTP API.
pub struct OpenAiModel {
    cfg: OpenAiConfig,
    base_url: String,
    /// The one HTTP client: turns, whole or streamed, and the server's probes.
    http: reqwest::Client,
    /// The headers of a turn's request (the key among them; never printed).
    headers: reqwest::header::HeaderMap,
    stop_rejected: AtomicBool,
    /// The server refused the grammar field: never sent again.
    grammar_rejected: AtomicBool,
    /// The server refused a grammar in llguidance's form: GBNF from then on.
    lark_rejected: AtomicBool,
    /// The server answered 400 to a chat that ends in the assistant's message: no prefill from
    /// then on.
    prefill_rejected: AtomicBool,
    /// The server answered 400 to `stream: true`: whole answers from then on.
    stream_rejected: AtomicBool,
    /// The server kept a stream open after its `[DONE]` (`ending.rs`): dropped there from then on.
    slow_to_end: AtomicBool,
    /// The server went on past a stop it was sent (`ending.rs`): cut at once at stops from then on.
    runs_past_stops: AtomicBool,
    /// The server behind the base URL, and what was learnt of it (its kind, its window,
    /// whether it has a tokenizer).
    upstream: Upstream,
    /// The key (and its derived forms), removed from every error built from a server's answer.
    redactor: Redactor,
}

impl std::fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("cfg", &self.cfg)
            .field("stop_rejected", &self.stop_rejected.load(Ordering::Relaxed))
            .finish()
    }
}

impl Model for OpenAiModel {
    fn turn<'a>(&'a self, request: &'a TurnRequest, on_delta: DeltaSink<'a>) -> TurnFuture<'a> {
        Box::pin(async move {
            let result = match self.cfg.turn_timeout {
                Some(limit) => tokio::time::timeout(limit, self.run_turn(request, on_delta))
                    .await
                    .unwrap_or(Err(LlmError::TurnTimeout { limit })),
                None => self.run_turn(request, on_delta).await,
            };
            // Errors from inside a 200 answer (a stream's `error` event) are redacted here.
            result.map_err(|e| e.redacted(&self.redactor))
        })
    }

    fn supports_prefill(&self) -> bool {
        // llama.cpp continues a conversation that ends in an assistant message (its
        // `--no-prefill-assistant` turns that off): known once the server was stated or probed.
        let llama_cpp = || self.upstream.known_kind() == Some(ServerKind::LlamaCpp);
        self.cfg.api == Api::Chat
            && !self.prefill_rejected.load(Ordering::Relaxed)
            && (self.cfg.prefill || llama_cpp())
    }

    fn describe(&self) -> String {
        let api = match self.cfg.api {
            Api::Chat => "chat",
            Api::Completions => "completions",
        };
        format!("{} ({api}) at {}", self.cfg.model, self.base_url)
    }

    fn prepare(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.cfg.grammar != GrammarMode::Off && !self.grammar_rejected() {
                self.server_kind().await;
            }
            // Once per client: concurrent runs wait for the one probe. A stated window needs none.
            if self.cfg.context_window.is_none() {
                self.upstream.window().await;
            }
        })
    }

    fn context_window(&self) -> Option<u64> {
        (self.cfg.context_window).or_else(|| self.upstream.learned_window())
    }

    fn count_tokens<'a>(
        &'a self,
        prompt: &'a Prompt,
    ) -> BoxFuture<'a, Result<Option<u64>, LlmError>> {
        Box::pin(async move { self.count(prompt).await })
    }

    fn wants_grammar(&self) -> bool {
        if self.cfg.grammar == GrammarMode::Off || self.grammar_rejected() {
            return false;
        }
        // Once the server's kind is known (stated, or detected by an earlier run of this
        // client), an agent for a server that takes no grammar does not build one: `tagloop
        // batch` builds an agent per task.
        match self.upstream.known_kind() {
            Some(kind) if self.cfg.grammar == GrammarMode::Auto => kind.takes_grammar(),
            Some(kind) => !kind.lacks_grammar(),
            None => true,
        }
    }
}
