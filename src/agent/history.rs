//! The conversation as the model sees it, kept in both shapes: chat messages, and (for
//! `/completions`) one growing text that is only ever appended to.

use crate::llm::{Message, Prompt, Role};
use crate::prompt::{PromptError, SystemInput, Templates};
use crate::protocol::Tag;

use super::Api;

/// The opened block the completions text ends in; the model's turn continues it.
pub(crate) const OPEN_THOUGHT: &str = "<thought>";

/// The history of one run.
#[derive(Debug, Clone)]
pub(crate) struct History {
    api: Api,
    messages: Vec<Message>,
    /// Completions mode only: the whole text so far.
    text: String,
    /// Completions mode only: how much of `text` the system prompt and the task take (the rest
    /// is the steps, rendered from the messages; a fitted prompt renders its own).
    head: usize,
    /// Completions mode only: the opened block the text ends in after the runtime's words,
    /// [`OPEN_THOUGHT`], or nothing where the prompt teaches no thought
    /// ([`SystemInput::thought`]).
    open: &'static str,
}

impl History {
    /// No messages yet (a run that could not start keeps this).
    pub(crate) fn empty(api: Api) -> Self {
        History {
            api,
            messages: Vec::new(),
            text: String::new(),
            head: 0,
            open: OPEN_THOUGHT,
        }
    }

    /// Start with the system prompt and the first user message.
    pub(crate) fn start(
        api: Api,
        templates: &Templates,
        input: &SystemInput<'_>,
        system: &str,
        question: &str,
    ) -> Result<Self, PromptError> {
        let text = match api {
            Api::Chat => String::new(),
            Api::Completions => templates.completion(input, system, question)?,
        };
        Ok(History {
            api,
            messages: vec![
                Message::new(Role::System, system),
                Message::new(Role::User, question),
            ],
            head: text.len(),
            text,
            open: if input.thought { OPEN_THOUGHT } else { "" },
        })
    }

    /// Rebuild from restored messages (system, question, then turns and observations).
    pub(crate) fn restore(
        api: Api,
        templates: &Templates,
        input: &SystemInput<'_>,
        messages: Vec<Message>,
    ) -> Result<Self, PromptError> {
        let mut it = messages.into_iter();
        let system = it.next().map(|m| m.content).unwrap_or_default();
        let question = it.next().map(|m| m.content).unwrap_or_default();
        let mut h = History::start(api, templates, input, &system, &question)?;
        for m in it {
            match m.role {
                Role::Assistant => h.push_turn(&m.content),
                _ => h.push_user(&m.content),
            }
        }
        Ok(h)
    }

    /// The messages so far.
    pub(crate) fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The prompt for the next turn.
    pub(crate) fn prompt(&self) -> Prompt {
        match self.api {
            Api::Chat => Prompt::Chat(self.messages.clone()),
            Api::Completions => Prompt::Text(self.text.clone()),
        }
    }

    /// The prompt for the next turn, lent rather than copied: the history is empty until
    /// [`History::give_back`] returns it (a turn late in a run carries kilobytes of history).
    pub(crate) fn lend(&mut self) -> Prompt {
        match self.api {
            Api::Chat => Prompt::Chat(std::mem::take(&mut self.messages)),
            Api::Completions => Prompt::Text(std::mem::take(&mut self.text)),
        }
    }

    /// Take back what [`History::lend`] lent.
    pub(crate) fn give_back(&mut self, prompt: Prompt) {
        match prompt {
            Prompt::Chat(messages) => self.messages = messages,
            Prompt::Text(text) => self.text = text,
        }
    }

    /// The prompt for continuing a turn the model has already written `partial` of.
    pub(crate) fn prompt_with_partial(&self, partial: &str) -> Prompt {
        match self.api {
            Api::Chat => {
                let mut m = self.messages.clone();
                m.push(Message::new(Role::Assistant, partial));
                Prompt::Chat(m)
            }
            Api::Completions => Prompt::Text(format!("{}{partial}", self.text)),
        }
    }

    /// The text the turn reader should see for what the model generated: in completions mode the
    /// prompt ended in an opened `<thought>` (unless it teaches none), which belongs to the turn.
    pub(crate) fn turn_text(&self, generated: &str) -> String {
        match self.api {
            Api::Completions if !starts_with_tag(generated) => format!("{}{generated}", self.open),
            _ => generated.to_string(),
        }
    }

    /// The prompt as it is now, the turn so far (`partial`, may be empty) appended: exactly
    /// what [`History::lend`] or [`History::prompt_with_partial`] would send (to count it).
    pub(crate) fn prompt_now(&self, partial: &str) -> Prompt {
        if partial.is_empty() {
            self.prompt()
        } else {
            self.prompt_with_partial(partial)
        }
    }

    /// The size of [`History::prompt_now`] as [`prompt_bytes`](super::context::prompt_bytes)
    /// measures it, without building it.
    pub(crate) fn bytes(&self, partial: &str) -> u64 {
        use super::context::message_bytes;
        let own: u64 = match self.api {
            Api::Chat => self
                .messages
                .iter()
                .map(|m| message_bytes(&m.content))
                .sum(),
            Api::Completions => self.text.len() as u64,
        };
        own + match (partial.is_empty(), self.api) {
            (true, _) => 0,
            (false, Api::Chat) => message_bytes(partial),
            (false, Api::Completions) => partial.len() as u64,
        }
    }

    /// A prompt from other messages (a fitted copy of [`History::messages`]: the system prompt
    /// and the task unchanged), the turn so far (`partial`, may be empty) appended.
    pub(crate) fn prompt_from(&self, mut messages: Vec<Message>, partial: &str) -> Prompt {
        match self.api {
            Api::Chat => {
                if !partial.is_empty() {
                    messages.push(Message::new(Role::Assistant, partial));
                }
                Prompt::Chat(messages)
            }
            Api::Completions => {
                let mut text = self.text.get(..self.head).unwrap_or_default().to_string();
                for m in messages.iter().skip(2) {
                    match m.role {
                        Role::Assistant => append_turn(&mut text, &m.content, self.open),
                        _ => append_user(&mut text, &m.content, self.open),
                    }
                }
                text.push_str(partial);
                Prompt::Text(text)
            }
        }
    }

    /// Append the model's turn (as [`History::turn_text`] gave it, cut to what the history keeps).
    pub(crate) fn push_turn(&mut self, kept: &str) {
        if self.api == Api::Completions {
            append_turn(&mut self.text, kept, self.open);
        }
        self.messages.push(Message::new(Role::Assistant, kept));
    }

    /// Append what the runtime says (an observation, or a follow-up question when continuing).
    pub(crate) fn push_user(&mut self, content: &str) {
        if self.api == Api::Completions {
            append_user(&mut self.text, content, self.open);
        }
        let past_question = self.messages.len() > 2;
        match self.messages.last_mut() {
            // Two user messages in a row (a follow-up after an observation) share one message.
            Some(last) if last.role == Role::User && past_question => {
                last.content.push_str("\n\n");
                last.content.push_str(content);
            }
            _ => self.messages.push(Message::new(Role::User, content)),
        }
    }
}

/// The completions text of a model's turn (its opening tag `open` is already in the text).
fn append_turn(text: &mut String, kept: &str, open: &str) {
    text.push_str(kept.strip_prefix(open).unwrap_or(kept));
}

/// The completions text of what the runtime says, then the opened block (`open`) the model
/// continues.
fn append_user(text: &mut String, content: &str, open: &str) {
    text.push('\n');
    text.push_str(content);
    text.push('\n');
    text.push_str(open);
}

/// Whether the model's text opens with one of the tags a model writes.
fn starts_with_tag(s: &str) -> bool {
    let Some(t) = s.trim_start().strip_prefix('<') else {
        return false;
    };
    let t = t.as_bytes();
    [Tag::Thought, Tag::Think, Tag::Action, Tag::FinalAnswer]
        .iter()
        .any(|tag| {
            let n = tag.name().as_bytes();
            t.len() >= n.len() && t[..n.len()].eq_ignore_ascii_case(n)
        })
}
