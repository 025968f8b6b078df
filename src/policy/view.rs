//! What a decision rule sees of a conversation ([`View`]): the client's instructions, its
//! messages in order, the tools it declared and what `tool_choice` allows (the types are
//! `conversation.rs`'s). Serve reads a request into one (`serve/request.rs`), a run its question and the tool it called
//! (`agent/first_call.rs`); the rules of this room read only it, so none of them depends on how
//! the conversation arrived.

use std::sync::OnceLock;

use super::conversation::{Choice, Entry, ToolSpec};
use super::mentions::Mentions;

/// A conversation as the rules see it (serve's `Ask::view`). Built once per request; what
/// several rules read of it is computed once, on first use (what the conversation said:
/// [`View::mentions`]).
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
    /// [`View::mentions`], once asked for.
    mentions: OnceLock<Mentions>,
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
            mentions: OnceLock::new(),
        }
    }

    /// The tool declared under `name`.
    pub(crate) fn tool(&self, name: &str) -> Option<&'a ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The latest user message (`""` before any): what the guess and the decision step ask
    /// about.
    pub(crate) fn question(&self) -> &'a str {
        self.conversation
            .iter()
            .rev()
            .find_map(|e| match e {
                Entry::Question(q) => Some(q.as_str()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// What the conversation mentions, its words and numbers (grounding's and
    /// unsaid-optional's reading of it), read once.
    pub(crate) fn mentions(&self) -> &Mentions {
        self.mentions
            .get_or_init(|| Mentions::of(self.instructions, self.conversation))
    }
}
