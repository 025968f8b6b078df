//! How the next turn is asked for an answer only: after a turn that could not give a usable
//! call, or after declined calls, whose answer's thought begins in the runtime's words.

use super::grammar;
use super::request::Ask;
use super::thought::ThoughtMode;
use crate::llm::{Api, TurnRequest};
use crate::prompt::DECLINED_THOUGHT;
use crate::protocol::STOP_SEQUENCES;

/// Ask the next turns for an answer only: the answer's grammar where the upstream takes one,
/// `</action>` a stop again, no watch for repeated calls.
pub(crate) fn switch_to_answer(
    (api, thought): (Api, ThoughtMode),
    ask: &Ask,
    request: &mut TurnRequest,
) {
    if request.grammar.is_some() {
        request.grammar = grammar::answer_only(ask, api, thought);
    }
    request.stop = STOP_SEQUENCES.iter().map(|s| s.to_string()).collect();
    request.end_at_repeated_block = None;
}

/// Ask for the answer after declined calls with the thought begun in the runtime's words
/// ([`DECLINED_THOUGHT`]): the grammar that writes them, or without a grammar, the turn so far
/// when the upstream can continue one (what the turn then starts with, its `<thought>` tag
/// unless the prompt opened it; else nothing, and the model writes its own thought).
pub(crate) fn after_decline(
    (api, thought): (Api, ThoughtMode),
    ask: &Ask,
    request: &mut TurnRequest,
    can_continue: bool,
) -> String {
    if request.grammar.is_some() {
        request.grammar = grammar::after_decline(ask, api, thought);
        return String::new();
    }
    if !can_continue {
        return String::new();
    }
    let open = if thought.opened(api) { "" } else { "<thought>" };
    format!("{open}{DECLINED_THOUGHT}")
}
