//! The text protocol: reading a model turn, the action grammar, binding arguments to a tool,
//! and rendering observations.
//!
//! Everything here is pure: no I/O, no async, byte offsets into the original text.
//!
//! * [`turn`] splits a turn into its blocks (SPEC §1.1).
//! * [`action`] parses the text of an `<action>` block into a call (SPEC §1.2).
//! * [`bind`] binds a call's arguments to a tool's JSON Schema (SPEC §1.3).
//! * [`observe`] renders tool output as an observation (SPEC §1.4).
//! * [`report`] puts the pieces together into the `tagloop parse --json` object (SPEC §2.1).

pub mod action;
pub mod bind;
pub mod observe;
pub mod report;
pub mod turn;

mod continuation;

pub use action::{
    ActionError, Arg, Call, MAX_DEPTH, Signature, SignatureError, parse_action, parse_action_with,
};
pub use bind::{BindError, bind, bind_tool};
pub use continuation::{Inside, continued_action, stopped_inside};
pub use observe::{neutralise, render_observation, truncate};
pub use report::{ParseReport, ReportAction, ReportError, parse_report};
pub use turn::{Block, Span, Tag, Turn, TurnKind, read_turn};

/// The stop strings the runtime sends to the server and enforces itself (SPEC §1.6).
pub const STOP_SEQUENCES: [&str; 3] = ["</action>", "<observation>", "</final_answer>"];
