//! What a decision rule sees of a conversation: the client's instructions, its messages in
//! order, the tools it declared and what `tool_choice` allows ([`View`]), and what a read turn
//! decided ([`Decision`]). Serve reads a request into these (`serve/request.rs`); the rules of
//! this room read only them, so none of them depends on how the conversation arrived.

use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

use super::grounding::Said;

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

/// A conversation as the rules see it (serve's `Ask::view`). Built once per request; what
/// several rules read of it is computed once, on first use (what the conversation said:
/// [`View::said`]).
#[derive(Clone)]
pub(crate) struct View<'a> {
    /// The client's system (and developer) messages, joined.
    pub instructions: &'a str,
    /// The conversation after the system messages, in order.
    pub conversation: &'a [Entry],
    /// The declared tools.
    pub tools: &'a [ToolSpec],
    /// What the turn may decide.
    pub choice: Choice,
    /// [`View::said`], once asked for.
    said: OnceLock<Said>,
}

impl<'a> View<'a> {
    /// The view of a conversation.
    pub(crate) fn new(
        instructions: &'a str,
        conversation: &'a [Entry],
        tools: &'a [ToolSpec],
        choice: Choice,
    ) -> Self {
        View {
            instructions,
            conversation,
            tools,
            choice,
            said: OnceLock::new(),
        }
    }

    /// The tool declared under `name`.
    pub(crate) fn tool(&self, name: &str) -> Option<&'a ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// What the conversation said, its words and numbers (grounding's and unsaid-optional's
    /// reading of it), read once.
    pub(crate) fn said(&self) -> &Said {
        self.said.get_or_init(|| Said::of(self))
    }
}
