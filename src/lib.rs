//! # tagloop
//!
//! A runtime for ReAct agents that speak a *text protocol* instead of native function calling.
//!
//! The model is taught five tags (`<question>`, `<thought>`, `<action>`, `<observation>`,
//! `<final_answer>`) by a templated system prompt; tagloop reads what it writes, runs the tool it
//! asked for and feeds the result back, until the model gives a final answer that the role accepts.
//!
//! ## Where to start
//!
//! The names a program needs are re-exported here, at the crate root:
//!
//! 1. **A model**: [`OpenAiModel`] (any OpenAI-compatible server: llama.cpp, vLLM, Ollama, …),
//!    built from an [`OpenAiConfig`]; or a [`ScriptedModel`] that replays a [`Script`] of turns
//!    (tests, demos, offline runs). Both are a [`Model`].
//! 2. **Tools**: a [`Registry`] of [`Tool`]s, from a closure ([`tool_fn`]), the built-in
//!    workspace [`toolkit`] (with [`ToolkitOptions`] and a [`Workspace`]), or an MCP server
//!    ([`McpSource`]).
//! 3. **A role**: [`Role`], its instructions and, if the answer is structured, its output schema
//!    ([`Role::for_type`] derives one from a Rust type).
//! 4. **An agent**: [`Agent::builder`] → [`AgentBuilder`] (settings in [`AgentConfig`]); a run ends
//!    in an [`Outcome`] with a [`Status`], typed with [`Agent::run_as`].
// The serve names are not links: the docs must build without the `serve` feature too.
//! 5. **The endpoint** (feature `serve`, on by default): `router` with a `ServeConfig` is
//!    `tagloop serve`'s OpenAI-compatible tool-calling proxy as an axum router.
//!
//! The errors these return: [`AgentError`], [`RoleError`], [`LlmError`], [`ToolError`],
//! [`WorkspaceError`], [`McpError`] and `ServeError`. Everything else (events, transcripts,
//! prompt templates, grammars, the protocol itself) is in the modules below.
//!
//! ```
//! use std::sync::Arc;
//! use tagloop::{Agent, Registry, Role, Script, ScriptedModel, Status, tool_fn};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Word { word: String }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Offline: the model replays two turns. `OpenAiModel::new(OpenAiConfig::new(url, name))?`
//! // talks to a server instead.
//! let script = Script::parse(concat!(
//!     "=== turn ===\n<thought>Shout it.</thought>\n<action>upper(word=\"hi\")</action>\n",
//!     "=== turn ===\n<thought>Done.</thought>\n<final_answer>HI</final_answer>\n",
//! ))?;
//! let model = Arc::new(ScriptedModel::new(Arc::new(script)));
//!
//! let mut tools = Registry::new();
//! tools.add(Arc::new(tool_fn("upper", "Upper-case a word.", |w: Word| async move {
//!     Ok(w.word.to_uppercase())
//! })));
//!
//! let agent = Agent::builder(model)
//!     .tools(tools)
//!     .role(Role::new("shouter", "Answer in capitals."))
//!     .build()?;
//! let outcome = agent.run("Shout hi").await;
//! assert_eq!(outcome.status, Status::Ok);
//! assert_eq!(outcome.final_answer, Some(serde_json::json!("HI")));
//! # Ok(()) }
//! ```
//!
//! ## The modules
//!
//! Data flows one way through the modules:
//!
//! ```text
//! agent (the loop) ──► prompt    (templates: system prompt, completions text)
//!                  ├─► llm       (model clients: chat, completions, scripted)
//!                  ├─► protocol  (turn reader, action grammar, binding, observations)
//!                  ├─► tools     (Tool trait, registry, built-in toolkit, MCP)
//!                  └─► session   (transcripts on disk)
//! serve (an OpenAI-compatible endpoint: tools in, text protocol to the upstream model; above the loop's parts)
//! queue (a Redis Streams task queue for workers on many machines; used by the CLI only)
//! ```
//!
//! No module reaches back up. `protocol` is its own crate, `tagloop-protocol`: pure, it knows
//! nothing of models or tools, and the compiler holds it to that.
//!
//! The default `cli` feature builds the `tagloop` binary and the `queue` module it uses, with
//! their dependencies (clap, indicatif, redis, …). A library user can turn it off:
//! `tagloop = { version = "0.1", default-features = false }`.
//!
//! The binary is built on this library, so a few public names exist only for it (the `queue`
//! module, the `shown` and `text` modules, the process-tree helpers in `tools`, the session
//! listing and lookup helpers): they are hidden from these docs and are not part of the stable API
//! (ARCHITECTURE.md, "The library's surface").

#![warn(missing_docs)]

pub mod agent;
pub mod llm;
pub mod policy;
pub mod prompt;
// Only the binary uses the queue (`tagloop queue`/`worker`); public because the binary is a
// separate crate on top of this one. Hidden: not part of the library's API, may change at any time.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod queue;
pub mod schema;
pub mod secret;
#[cfg(feature = "serve")]
pub mod serve;
pub mod session;
// How the binary escapes outside text for the terminal and its log lines; the library uses it
// inside the crate. Public only for the binary, so hidden: not part of the library's API.
#[doc(hidden)]
pub mod shown;
// Byte counts and clipped text as a user reads them; public only so the binary's messages say a
// size the same way (`text::byte_size`), so hidden: not part of the library's API.
#[doc(hidden)]
pub mod text;
pub mod tools;

// The curated API: what a program embedding an agent needs, at the root (see the crate docs).
// The module paths stay valid; these are the same items.
pub use agent::{Agent, AgentBuilder, AgentConfig, AgentError, Outcome, Role, RoleError, Status};
pub use llm::openai::{OpenAiConfig, OpenAiModel};
pub use llm::{LlmError, Model};
pub use llm::{Script, ScriptedModel};
#[cfg(feature = "serve")]
pub use serve::{ServeConfig, ServeError, router};
pub use tools::{
    McpError, McpSource, Registry, Tool, ToolError, ToolkitOptions, Workspace, WorkspaceError,
    tool_fn, toolkit,
};

mod scan;
mod upstream;

/// The text protocol, its own crate ([`tagloop_protocol`]): reading a model turn, the action
/// grammar, binding arguments to a tool, observations, dialects and the GBNF grammar of a turn.
/// Pure (no I/O, no async); re-exported here so `tagloop::protocol::…` names it.
pub use tagloop_protocol as protocol;

/// The README's Rust examples, compiled as doc tests so they stay true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The Rust examples of the library guide (docs/library.md), compiled as doc tests like the
/// README's: they moved there from the README and must stay true.
#[doc = include_str!("../docs/library.md")]
#[cfg(doctest)]
pub struct LibraryDoctests;
