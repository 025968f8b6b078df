//! # tagloop
//!
//! A runtime for ReAct agents that speak a *text protocol* instead of native function calling.
//!
//! The model is taught five tags (`<question>`, `<thought>`, `<action>`, `<observation>`,
//! `<final_answer>`) by a templated system prompt; tagloop reads what it writes, runs the tool it
//! asked for and feeds the result back, until the model gives a final answer that the role accepts.
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

#![warn(missing_docs)]

pub mod agent;
pub mod llm;
pub mod prompt;
#[cfg(feature = "cli")]
pub mod queue;
pub mod schema;
pub mod secret;
#[cfg(feature = "serve")]
pub mod serve;
pub mod session;
pub mod shown;
pub mod tools;

mod text;

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
