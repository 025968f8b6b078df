//! # tagloop-protocol
//!
//! The text protocol of tagloop agents: reading a model turn, the action
//! grammar, binding arguments to a tool, and rendering observations. A model is taught five tags
//! (`<question>`, `<thought>`, `<action>`, `<observation>`, `<final_answer>`); this crate reads
//! what it writes. The `tagloop` runtime re-exports it as `tagloop::protocol`.
//!
//! Everything here is pure: no I/O, no async, byte offsets into the original text. Every input
//! is bounded: the readers are linear in the text, nesting is capped ([`MAX_DEPTH`]), grammars
//! have a size budget.
//!
//! * `turn/`: [`read_turn`] splits a turn into its blocks (docs/protocol.md §1.1).
//! * `action/`: [`parse_action`] parses the text of an `<action>` block into a call (docs/protocol.md §1.2).
//! * `bind.rs`: [`bind`] binds a call's arguments to a tool's JSON Schema (docs/protocol.md §1.3).
//! * `observe.rs`: [`render_observation`] renders tool output as an observation (docs/protocol.md §1.4).
//! * `report.rs`: [`parse_report`] puts the pieces together into the `tagloop parse --json`
//!   object (docs/protocol.md §2.1).
//! * `continuation.rs`: [`stopped_inside`] tells when a stop string fired where it cannot have
//!   ended the turn (inside an action's string or a `<think>` block).
//! * `dialect/`: other tool-call formats (Hermes, Qwen3-Coder, `<function_calls>`, JSON or
//!   XML in `<action>`) read as actions (docs/protocol.md §1.8).
//! * `grammar/`: [`turn_grammar`] writes the grammar of one turn for servers that constrain
//!   sampling (docs/protocol.md §1.7).

#![warn(missing_docs)]

mod action;
mod bind;
mod continuation;
mod dialect;
mod grammar;
mod observe;
mod report;
mod steps;
mod turn;

pub use action::{
    ActionError, Arg, Call, MAX_DEPTH, Signature, SignatureError, parse_action, parse_action_with,
};
pub use bind::{BindError, bind, bind_tool};
pub use continuation::{Inside, continued_action, stopped_inside};
pub use dialect::Dialect;
pub use grammar::{
    GbnfError, Grammar, KnownPaths, LAZY_TRIGGERS, NativeShape, PATH_ANNOTATION, PathKind,
    Simplified, ThoughtShape, ToolShape, TurnShape, decision_grammar, decision_grammar_with,
    native_grammar, parse_gbnf, turn_grammar, turn_grammar_with,
};
pub use observe::{neutralise, render_observation, truncate};
pub use report::{ParseReport, ReportAction, ReportError, ReportKind, parse_report};
pub use turn::{Block, Span, Tag, Turn, TurnKind, read_turn, read_turn_with, unwrap_cdata};

/// The stop strings the runtime enforces itself and sends to the server, the first four of them
/// (docs/protocol.md §1.6): the end of an action or an answer, a model-written observation, and
/// the end of a call in the Hermes/Qwen or `<function_calls>` dialects (§1.8).
pub const STOP_SEQUENCES: [&str; 5] = [
    "</action>",
    "<observation>",
    "</final_answer>",
    "</tool_call>",
    "</function_calls>",
];
