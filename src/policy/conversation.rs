//! The conversation's parts, as the decision room's rules read them: what `tool_choice` allows
//! ([`Choice`]), a declared tool ([`ToolSpec`]), the messages in order ([`Entry`], with the calls
//! of earlier turns as [`PastCall`]s) and what a read turn decided ([`Decision`]). Serve reads a
//! request into these (`serve/request.rs`), a run its question and the tool it called (`agent/first_call.rs`);
//! `view.rs` puts them together for the rules.

use std::sync::Arc;

use serde_json::{Map, Value};

/// Which decisions the upstream may take this turn (OpenAI's `tool_choice`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Choice {
    /// A call or an answer.
    Auto,
    /// Calls only.
    Required,
    /// A call of this tool only.
    Named(String),
    /// An answer only.
    None,
}

/// A tool the client declared, with its parameters' validator.
#[derive(Clone)]
pub(crate) struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    pub validator: Arc<jsonschema::Validator>,
}

impl ToolSpec {
    /// A run's tool, from its name, description and parameters' schema (serve reads a client's
    /// tools with its own refusals, `serve/request.rs`). A run binds a call's arguments with
    /// `protocol::bind`, never with this validator, and its rules read a tool's words: a schema
    /// the validator cannot compile (an MCP server's, past `crate::schema::compile`'s bounds)
    /// still gives the tool, with a validator that accepts any arguments.
    pub(crate) fn of_run(name: &str, description: &str, parameters: &Value) -> Option<Self> {
        // `true` (any value) compiles: `None` only should the validator refuse even that.
        let validator = crate::schema::compile(parameters)
            .or_else(|_| crate::schema::compile(&Value::Bool(true)))
            .ok()?;
        Some(ToolSpec {
            name: name.to_string(),
            description: description.to_string(),
            parameters: parameters.clone(),
            validator: Arc::new(validator),
        })
    }
}

/// One call of an assistant message in the history.
#[derive(Debug, Clone)]
pub(crate) struct PastCall {
    pub name: String,
    pub arguments: Map<String, Value>,
}

/// The conversation after the system messages, in order.
#[derive(Debug, Clone)]
pub(crate) enum Entry {
    /// A user message.
    Question(String),
    /// An assistant message with text (an earlier answer).
    Answer {
        reasoning: Option<String>,
        text: String,
    },
    /// An assistant message with tool calls.
    Calls {
        reasoning: Option<String>,
        calls: Vec<PastCall>,
    },
    /// The results of calls (`tool` messages), each with the name of the tool that made it.
    Results(Vec<(String, String)>),
}

/// What the client gets from a turn that could be used.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    /// Tool calls: the tool's name and its validated arguments, in the order written.
    Calls(Vec<(String, Map<String, Value>)>),
    /// An answer: its text (for a schema, the validated JSON's text); `cut` when the token
    /// limit ended the turn inside it.
    Answer { text: String, cut: bool },
}
