//! The conversation's parts, as the decision room's rules read them: what `tool_choice` allows
//! ([`Choice`]), a declared tool ([`ToolSpec`]), the messages in order ([`Entry`], with the calls
//! of earlier turns as [`PastCall`]s) and what a read turn decided ([`Decision`]). Serve reads a
//! request into these (`serve/request.rs`), a run its question and tools (`agent/first_call.rs`);
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
    /// A tool from its name, description and parameters' schema; `None` when the schema does
    /// not compile (`crate::schema::compile`'s bounds). Serve reads a client's tools with its
    /// own refusals (`serve/request.rs`); a run's tools are its toolkit's.
    pub(crate) fn of(name: &str, description: &str, parameters: &Value) -> Option<Self> {
        let validator = crate::schema::compile(parameters).ok()?;
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
