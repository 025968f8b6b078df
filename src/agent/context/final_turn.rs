//! The last turn a full window allows: when not even the smallest turn budget fits beside the
//! fitted history, but a short final answer still does, the model gets one turn in which only a
//! final answer is accepted (the same turn, and grammar, as at the step limit), and is told why
//! (the loop asks for that turn: `Next::context_full`).

use crate::llm::{Message, Role};

/// What the model reads before its final-answer-only turn. Added to the request only: the
/// history (and so the transcript) does not keep it, as it does not keep anything fitting did.
pub const FINAL_NOTE: &str = "The context window is full: no more tools can run. Write your final answer now, the best answer you can give from what you have seen.";

/// Add [`FINAL_NOTE`] to the last user message of a request (a new one when the last is not).
pub(super) fn add_note(messages: &mut Vec<Message>) {
    match messages.last_mut() {
        Some(last) if last.role == Role::User => {
            last.content.push_str("\n\n");
            last.content.push_str(FINAL_NOTE);
        }
        _ => messages.push(Message::new(Role::User, FINAL_NOTE)),
    }
}
