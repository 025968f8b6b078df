//! What an `<action>` block reads as: a [`Call`] of a tool with its [`Arg`]s, in the order
//! written. The types the parser's parts share (`grammar.rs` builds the arguments, `search.rs`
//! the calls), below all of them.

use serde_json::Value;

/// One argument of a call: named (`path="a"`) or positional (`"a"`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Arg {
    /// The name, or `None` for a positional argument.
    pub name: Option<String>,
    /// The value, as JSON.
    pub value: Value,
}

/// A tool call read from an `<action>` block by [`parse_action`](crate::parse_action); its arguments are not yet
/// bound to the tool's parameters (see [`bind`](crate::bind)).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Call {
    /// The tool name (may contain `.` and `-`: `fs.read_file`).
    pub tool: String,
    /// The arguments in the order written.
    pub args: Vec<Arg>,
    /// Leniencies used to read the call (a markdown fence around it, text after it, ...).
    pub warnings: Vec<String>,
}
