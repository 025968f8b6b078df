//! A thought that never ends: when a constrained turn was cut inside its thought, what closes
//! the thought before the turn is continued under the decision's grammar (docs/protocol.md
//! §1.7).

use crate::protocol::{self, Tag, TurnKind};

/// A constrained turn that never left its thought: the degeneration guard cut it, or its token
/// budget ran out, before any `<action>` or `<final_answer>`. Small models do this when the
/// likeliest next token (end of text) is masked; the turn is then continued from the cut with
/// the decision's grammar, so it ends in a decision instead of being lost (docs/protocol.md
/// §1.7). `cut` says the turn was cut (the guard's repetition or the budget's length, not a
/// stop or the model's own end). The turn is read as its caller reads it, knowing the tools'
/// `names` (a call in another dialect, `<get_weather>…`, is a decision, not a thought to close).
/// Returns what closes the thought before the decision.
pub(crate) fn thought_end(text: &str, cut: bool, names: &[&str]) -> Option<&'static str> {
    if !cut {
        return None;
    }
    let turn = protocol::read_turn_with(text, names);
    let last = turn.blocks.last()?;
    let in_thought = turn.kind == TurnKind::None
        && last.tag == Tag::Thought
        && turn.blocks.iter().all(|b| b.tag != Tag::Think || b.closed);
    match in_thought {
        true if last.closed => Some("\n"),
        true => Some("\n</thought>\n"),
        false => None,
    }
}
