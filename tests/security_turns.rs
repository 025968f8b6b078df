//! Turns built to make the reader's work grow faster than the turn (issue 21, item 6): each is
//! read through the public API and must give the right reading, at a size where a reader that
//! rescans the rest of the turn per tag does billions of steps.
//!
//! The proof that reading is linear is counted, not timed: `tagloop-protocol/src/turn/linear.rs` counts
//! the scanner's steps per byte on these shapes and more (they failed, at 514 to 317,315 steps
//! per byte, before the fix). The tests here check that the fast reading is still the right one.

use tagloop::protocol::{Dialect, Tag, TurnKind, read_turn, read_turn_with};

/// The turn of the issue: 20,000 thoughts (400 KB), each of which searched the rest of the
/// turn for an `<action>`.
#[test]
fn twenty_thousand_thoughts() {
    let thoughts = "<thought>x</thought>".repeat(20_000);
    let turn = read_turn(&thoughts);
    assert_eq!(turn.kind, TurnKind::None);
    assert_eq!(turn.blocks.len(), 20_000);
    assert_eq!(turn.thought.as_deref().map(str::len), Some(20_000 * 3 - 2));

    let turn = read_turn(&format!("{thoughts}<action>f(a=1)</action>"));
    assert_eq!(turn.kind, TurnKind::Action);
    assert_eq!(turn.action.as_deref(), Some("f(a=1)"));
    assert_eq!(turn.action_offset, Some(thoughts.len() + "<action>".len()));
}

/// Many removed `<think>` blocks, then many thoughts: every `<` and every thought walked the
/// whole list of removed blocks.
#[test]
fn many_think_blocks_then_many_thoughts() {
    let text = format!(
        "{}{}<final_answer>done</final_answer>",
        "<think>r</think>\n".repeat(10_000),
        "<thought>t</thought>".repeat(10_000)
    );
    let turn = read_turn(&text);
    assert_eq!(turn.kind, TurnKind::Final);
    assert_eq!(turn.final_text.as_deref(), Some("done"));
    assert_eq!(
        turn.reasoning.as_deref().map(str::len),
        Some(10_000 * 3 - 2)
    );
    let count = |tag| turn.blocks.iter().filter(|b| b.tag == tag).count();
    assert_eq!((count(Tag::Think), count(Tag::Thought)), (10_000, 10_000));
}

/// Unclosed `<think>`s after text are text; each asked again whether the text before it was
/// blank. A `<think>` that leads the turn and is never closed still runs to the end.
#[test]
fn many_unclosed_thinks_after_text() {
    let text = format!(
        "{}{}<action>f()</action>",
        "<think>r</think> ".repeat(5_000),
        "x<think>".repeat(20_000)
    );
    let turn = read_turn(&text);
    assert_eq!(turn.kind, TurnKind::Action);
    assert_eq!(turn.action.as_deref(), Some("f()"));

    let turn = read_turn(&format!(" <think>{}", "<think>".repeat(20_000)));
    assert_eq!(turn.kind, TurnKind::None);
    assert_eq!(turn.blocks.len(), 1);
    assert!(!turn.blocks[0].closed);
}

/// Thousands of dialect tags mentioned in thoughts (each compared with every block), then
/// the real call: only the real one is read.
#[test]
fn many_mentioned_dialect_tags_then_a_call() {
    let mentions = "<thought>maybe <tool_call> or <search></thought>".repeat(10_000);
    let call = r#"<tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_call>"#;
    let turn = read_turn_with(&format!("{mentions}\n{call}"), &["search"]);
    assert_eq!(turn.kind, TurnKind::Action);
    assert_eq!(turn.dialect, Some(Dialect::Hermes));
    assert_eq!(turn.action.as_deref(), Some("search(query=\"q\")"));
    assert_eq!(turn.action_offset, Some(mentions.len() + 1));

    let turn = read_turn_with(
        &format!("{mentions}\n<search><query>q</query></search>"),
        &["search"],
    );
    assert_eq!(turn.dialect, Some(Dialect::XmlTool));
    assert_eq!(turn.action.as_deref(), Some("search(query=\"q\")"));
}
