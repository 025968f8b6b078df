//! `tagloop serve`: an OpenAI-compatible endpoint that answers `tools` with `tool_calls` for any
//! model, by speaking tagloop's text protocol to the upstream server.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use tagloop::serve::{ServeConfig, router};
//!
//! let app = router(ServeConfig::new("http://127.0.0.1:8080/v1"))?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```
//!
//! Mounted this way, the connections are the host application's to bound; [`serve`] serves the
//! endpoint alone with header, idle and connection limits (`tagloop serve` uses it):
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use tagloop::serve::{ServeConfig, serve};
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
//! serve(listener, ServeConfig::new("http://127.0.0.1:8080/v1"), std::future::pending()).await?;
//! # Ok(()) }
//! ```
//!
//! A `POST /v1/chat/completions` with `tools` (or `response_format: json_schema`) is answered
//! by the core; one without is passed to the upstream unchanged. The parts:
//!
//! * `body.rs`: the body's serde types (`serde_path_to_error` names a mistyped field);
//!   `request.rs`: the body read and checked ([`ServeError::BadRequest`] names the field);
//!   `json_budget.rs` counts its JSON values before any is built.
//! * `conversation.rs`: the messages as a run's history (system prompt, question, actions,
//!   observations); `fit.rs` fits it into the upstream's context window as a run's is.
//! * `grammar.rs`: the turn's grammar for this request (`tool_choice`, parallel calls, schema),
//!   a `TurnShape` the protocol crate writes; `thought.rs` whether its calling turns begin
//!   with a thought (`--thought`).
//! * `read.rs`: the upstream's turn read, bound and validated, or the correction it gets.
//! * The rules that judge a read turn live in the decision room, `crate::policy`, which reads
//!   the request as a `View` (`Ask::view`): grounding, the guess's verdict,
//!   further calls, choose, unsaid-optional. Here are what they ask of the upstream: `ahead.rs`
//!   sends the guess beside the turn, `reask.rs` asks a lone call again for the tool choose
//!   names.
//! * `answer.rs`: the core, turn → repair → [`ServeEvent`]s; each turn asked through the
//!   turn engine (`agent/turn/`), `seat.rs` being serve's seat; `core.rs`: what the core is
//!   given (`Core`) and what a request cost (`Trace`).
//! * `live.rs`: the turn watched as it streams, so that an answer no correction can replace
//!   goes out while the upstream still writes it.
//! * `redact.rs`: the upstream key taken out of the events (calls whole, text as it streams).
//! * `response.rs`: the whole answer from the events; `chunks.rs` the streamed one.
//! * `routes.rs`: which path each face answers; `http.rs`: keys, limits, log lines, transcripts; `upstream.rs` the pass-through;
//!   `clients.rs` the upstream clients by model name; `listen.rs` the accept loop ([`serve`]).
//! * `passthrough/`: the router's fallback, what serve does not answer passed to the upstream
//!   (embeddings, a model's lookup, uploads), serve's key checked first
//!   ([`ServeConfig::passthrough`]).
//! * `native/`: the model's own tool format (`--tool-format`), where its chat template
//!   declares tools: the template rendered here, a grammar of its `<tool_call>` blocks.
//! * `face.rs`: what a face of the endpoint is (its reading and its rendering); `messages/` the
//!   Anthropic face (`POST /v1/messages`), `plain.rs` its answer to a request without tools;
//!   `responses/` OpenAI's Responses API (`POST /v1/responses`, `GET` and `DELETE
//!   /v1/responses/{id}`), with its stored conversations.
//!
//! Parallel calls: with `parallel_tool_calls` (OpenAI's default, true) a turn may hold 1 to
//! [`MAX_PARALLEL_CALLS`] `<action>` blocks, one after another; `</action>` is then not a stop
//! (the model stops after its last call, or at the `<observation>` it would invent), the grammar
//! requires every action but the last to be closed, and the reader reads action after action.
//! With `parallel_tool_calls: false` a turn holds exactly one call, as in a run.

mod ahead;
mod answer;
mod answer_only;
mod body;
mod chunks;
mod clients;
mod config;
mod conversation;
mod core;
mod error;
mod event;
mod face;
mod fit;
mod grammar;
mod http;
mod json_budget;
mod key;
mod listen;
mod live;
mod messages;
mod native;
mod outbox;
mod passthrough;
mod plain;
mod read;
mod reask;
mod redact;
mod request;
mod request_log;
mod response;
mod responses;
mod routes;
mod seat;
mod thought;
mod tool_format;
mod transcript;
mod upstream;

pub use config::ServeConfig;
pub use error::ServeError;
pub use event::{FinishReason, ServeEvent, ToolCallOut};
pub use listen::serve;
pub use request::MAX_PARALLEL_CALLS;
pub use thought::ThoughtMode;
pub use tool_format::ToolFormat;

/// The endpoint as an axum router (`POST /v1/chat/completions`, `GET /v1/models`,
/// Anthropic's `POST /v1/messages` and `POST /v1/messages/count_tokens`, and the Responses
/// API's `POST /v1/responses`, `GET` and `DELETE /v1/responses/{id}`; every other route passed
/// through to the upstream unless [`ServeConfig::passthrough`] is off), to serve on its own or
/// mount in a larger application. Fails with [`ServeError::Config`] when the upstream
/// URL is not an `http(s)` URL or the response store cannot be opened in
/// [`ServeConfig::data_dir`]; no request is made until a client asks.
pub fn router(mut config: ServeConfig) -> Result<axum::Router, ServeError> {
    // With the `no-thought` policy off, turns that may call keep their thought (`thought.rs`).
    if !config.policies.on(crate::policy::Policy::NoThought) {
        config.thought = ThoughtMode::Free;
    }
    routes::build(config)
}

/// The decision room's unit tests read their conversations from request bodies, as serve does.
#[cfg(test)]
pub(crate) use request::{Ask, parse_json};

/// The endpoint's parts that its integration tests drive on their own (the streamed chunks on a
/// test's router, the pass-through in front of a fake upstream). Not part of the API: they may
/// change with any release.
#[doc(hidden)]
pub mod testing {
    pub use super::chunks::{ChunkMeta, sse_response};
    pub use super::upstream::{Upstream, UpstreamLimits};
}
