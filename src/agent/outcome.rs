//! The outcome of a run (docs/protocol.md §2.2).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::llm::{Message, Usage};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// A final answer was accepted.
    Ok,
    /// The step limit was reached (`final` holds the last-chance answer if it validated).
    MaxSteps,
    /// The model repeated a call it had been told was a loop.
    LoopDetected,
    /// Three final answers in a row were refused.
    InvalidFinal,
    /// The history no longer fits the model's context window even fitted (see
    /// [`crate::agent::context`]); `final` holds the answer of the final-answer-only turn the
    /// window still allowed, if it validated.
    ContextExceeded,
    /// A runtime error: the model server failed after retries, or the script ran out.
    Error,
}

impl Status {
    /// The status as it appears in JSON (`ok`, `max_steps`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::MaxSteps => "max_steps",
            Status::LoopDetected => "loop_detected",
            Status::InvalidFinal => "invalid_final",
            Status::ContextExceeded => "context_exceeded",
            Status::Error => "error",
        }
    }
}

/// How far a run has got: in the outcome, in every `step_completed` record, and restored when a
/// run is continued.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Steps taken (model turns that ended in an action, a parse error, no decision or a
    /// repetition).
    pub steps: u32,
    /// Model turns (continuations and retries of a turn excluded).
    pub llm_calls: u32,
    /// Tools that actually ran, in order of first use.
    pub tools_used: Vec<String>,
    /// Tokens over the run.
    pub usage: Usage,
}

/// What a run produced. Serialises to exactly the docs/protocol.md §2.2 object; the transcript is kept
/// beside it for library callers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome<T = Value> {
    /// How the run ended.
    pub status: Status,
    /// The accepted final answer: text, or the validated JSON value (typed for `run_as`).
    #[serde(rename = "final")]
    pub final_answer: Option<T>,
    /// How far the run got: steps, model calls, tools used, tokens.
    #[serde(flatten)]
    pub progress: Progress,
    /// The id of the saved transcript, if one was written.
    pub session: Option<String>,
    /// What went wrong, for `error` (and the reason for the other non-`ok` statuses).
    pub error: Option<String>,
    /// The whole conversation as the model saw it.
    #[serde(skip)]
    pub messages: Vec<Message>,
}

impl<T> Outcome<T> {
    /// The same outcome with another final answer (used to hand it back typed).
    pub fn with_final<U>(self, final_answer: Option<U>) -> Outcome<U> {
        Outcome {
            status: self.status,
            final_answer,
            progress: self.progress,
            session: self.session,
            error: self.error,
            messages: self.messages,
        }
    }
}
