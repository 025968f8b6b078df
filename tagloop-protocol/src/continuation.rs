//! Continuing a turn that a stop string cut where it cannot have ended it.
//!
//! Stop strings (`</action>`, `<observation>`, …) end a turn, but a model may legitimately write
//! them *inside* an action's string argument (HTML, code) or inside a `<think>` block. The
//! server stops there all the same. [`stopped_inside`] tells, from the text so far, whether that
//! happened, so the loop can ask the model to continue the same turn; once a turn has been
//! continued inside an action string, [`continued_action`] reads the action body as everything
//! from its start to the end of the turn (the stop strings in it are content).

use super::action::parse_action;
use super::turn::{Tag, Turn, TurnKind, read_turn};

/// Where a stop string fired inside the turn, when it cannot have ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inside {
    /// Inside an open `<think>` block.
    Think,
    /// Inside an open string of the action whose body starts at this byte offset.
    ActionString(usize),
}

/// Whether the text so far stopped where a stop string cannot have ended the turn: inside an
/// open `<think>` block, or inside an open string of the deciding action. `action_start` is
/// known once the turn has been continued inside the action: its body then runs to the end.
pub fn stopped_inside(text: &str, action_start: Option<usize>) -> Option<Inside> {
    let open_string = |body: &str| matches!(parse_action(body.trim()), Err(e) if e.open_string);
    if let Some(start) = action_start {
        return open_string(text.get(start..).unwrap_or_default())
            .then_some(Inside::ActionString(start));
    }
    let turn = read_turn(text);
    if turn.blocks.iter().any(|b| b.tag == Tag::Think && !b.closed) {
        return Some(Inside::Think);
    }
    if turn.kind != TurnKind::Action || turn.deciding_closed {
        return None;
    }
    let block = turn
        .blocks
        .iter()
        .rev()
        .find(|b| b.tag == Tag::Action && !b.closed)?;
    open_string(text.get(block.body.start..).unwrap_or_default())
        .then_some(Inside::ActionString(block.body.start))
}

/// Re-read a turn that was continued inside an action string: the action's body is everything
/// from `start` to the end of the text, and the last stop removed the real closing tag (the
/// history puts it back).
pub fn continued_action(turn: &mut Turn, text: &str, start: usize) {
    let body = text.get(start..).unwrap_or_default();
    turn.kind = TurnKind::Action;
    turn.action = Some(body.trim().to_string());
    turn.action_offset = Some(start + (body.len() - body.trim_start().len()));
    turn.final_text = None;
    turn.discarded = None;
    turn.history_end = text.len();
    turn.deciding_closed = false;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_inside_an_action_string_or_think_is_found() {
        let text = r#"<thought>Write it.</thought><action>write_file(path="a.html", content="<p>"#;
        let start = text.find("write_file").unwrap_or_default();
        assert_eq!(
            stopped_inside(text, None),
            Some(Inside::ActionString(start))
        );
        assert_eq!(
            stopped_inside("<think>what about <observation>", None),
            Some(Inside::Think)
        );
        // A closed action, or text with no open string, was ended by its stop.
        assert_eq!(
            stopped_inside(r#"<action>read_file(path="a")</action>"#, None),
            None
        );
        assert_eq!(stopped_inside(r#"<action>read_file(path="a")"#, None), None);
    }

    #[test]
    fn a_continued_action_runs_to_the_end_of_the_turn() {
        let text = r#"<action>write_file(path="a", content="x</action>y")"#;
        let mut turn = read_turn(text);
        continued_action(&mut turn, text, "<action>".len());
        assert_eq!(turn.kind, TurnKind::Action);
        assert_eq!(
            turn.action.as_deref(),
            Some(r#"write_file(path="a", content="x</action>y")"#)
        );
        assert_eq!(turn.history_end, text.len());
        assert!(!turn.deciding_closed);
    }
}
