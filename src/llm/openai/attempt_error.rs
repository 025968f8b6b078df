//! What one attempt at a turn ended in, with the facts the retry loop decides on.

use crate::llm::LlmError;

/// What went wrong in one attempt, with what the retry loop needs to know.
pub(super) struct AttemptError {
    pub(super) err: LlmError,
    /// Text was already passed to the caller: never retry.
    pub(super) emitted: bool,
    /// A 400 naming `stop`.
    pub(super) stop_rejected: bool,
    /// A 400 naming the grammar field.
    pub(super) grammar_rejected: bool,
    /// A 400 refusing `stream: true`.
    pub(super) stream_rejected: bool,
    /// The connection closed before any answer came (a kept connection the server had just
    /// closed): sent again at once, once.
    pub(super) closed_early: bool,
}

impl From<LlmError> for AttemptError {
    fn from(err: LlmError) -> Self {
        AttemptError {
            err,
            emitted: false,
            stop_rejected: false,
            grammar_rejected: false,
            stream_rejected: false,
            closed_early: false,
        }
    }
}
