//! The last turn a full window allows: when not even the smallest turn budget fits beside the
//! fitted history, but a short final answer still does, the model gets one turn in which only a
//! final answer is accepted (the same turn, and grammar, as at the step limit), and is told why.

use crate::llm::{Message, Role};

use super::super::Status;
use super::super::run::{Ending, Next, TurnPlan};

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

/// What follows a prompt that does not fit even fitted: the final-answer-only turn when one fits
/// and this turn is not already it, else the end of the run with `context_exceeded`.
pub(crate) fn context_full(plan: TurnPlan, final_fits: bool, why: String) -> Next {
    if final_fits && !plan.final_only {
        Next::LastTurn
    } else {
        Next::End(Ending::stop(Status::ContextExceeded, why))
    }
}
