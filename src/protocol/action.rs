//! The action grammar (SPEC §1.2), written with nom 8.

use serde_json::Value;

/// One argument of a call: named (`path="a"`) or positional (`"a"`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Arg {
    /// The name, or `None` for a positional argument.
    pub name: Option<String>,
    /// The value, as JSON.
    pub value: Value,
}

/// A parsed tool call.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Call {
    /// The tool name (may contain `.` and `-`: `fs.read_file`).
    pub tool: String,
    /// The arguments in the order written.
    pub args: Vec<Arg>,
    /// Leniencies used to read the call (a markdown fence around it, text after it, ...).
    pub warnings: Vec<String>,
}

/// Why an action did not parse: the furthest point reached and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[error("{message} at offset {offset}")]
pub struct ActionError {
    /// What was expected, in words a model can act on.
    pub message: String,
    /// Byte offset into the action text.
    pub offset: usize,
    /// True when the text ended inside a string that was never closed (a stop string may have cut
    /// it: the runtime then lets the model continue the same turn).
    pub open_string: bool,
}

/// A tool signature for quote disambiguation: `write_file(path, content)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// The tool name.
    pub name: String,
    /// Parameter names in declaration order.
    pub params: Vec<String>,
}

/// Parse the text of an `<action>` block; where several readings fit, the earliest closing quote wins.
pub fn parse_action(text: &str) -> Result<Call, ActionError> {
    parse_action_with(text, &|_| true)
}

/// Parse the text of an `<action>` block, taking the earliest reading that `accept` agrees to
/// (for example: one that binds to the tool's signature).
pub fn parse_action_with(text: &str, accept: &dyn Fn(&Call) -> bool) -> Result<Call, ActionError> {
    let _ = (text, accept);
    todo!("protocol helper")
}
