//! Reading a turn is linear in its length (issue 21, item 6): for each shape of turn that made
//! the reader rescan the rest of the text once per tag, the scanning work, counted in
//! [`steps`](crate::steps), stays within a fixed number of steps per byte.
//!
//! Work is counted, not timed: a quadratic reader does thousands of steps per byte on these
//! 64 KiB turns, a linear one a few dozen at most, whatever the machine's load.

use super::read_turn_with;
use crate::steps;

/// Size of each pathological turn.
const SIZE: usize = 64 * 1024;

/// Steps per byte a linear reader stays under: each byte is looked at by a fixed number of
/// passes (`<think>`, the blocks, the next deciding tag, closing tags, dialect blocks).
const PER_BYTE: u64 = 16;

/// `prefix`, then `unit` repeated to fill [`SIZE`], then `suffix`.
fn shape(prefix: &str, unit: &str, suffix: &str) -> String {
    format!("{prefix}{}{suffix}", unit.repeat(SIZE / unit.len()))
}

/// The scanning steps of reading `text` with `tools` declared.
fn work(text: &str, tools: &[&str]) -> u64 {
    steps::take();
    let _ = read_turn_with(text, tools);
    steps::take()
}

/// The shapes of `cases` (name, turn, declared tools) whose reading takes more than
/// [`PER_BYTE`] steps per byte, each with its count (all of them, not just the first).
fn quadratic(cases: &[(&str, String, &[&str])]) -> Vec<String> {
    let mut over = Vec::new();
    for (name, text, tools) in cases {
        let steps = work(text, tools);
        if steps > PER_BYTE * text.len() as u64 {
            over.push(format!(
                "{name}: {steps} steps for {} bytes ({} per byte)",
                text.len(),
                steps / text.len() as u64
            ));
        }
    }
    over
}

/// Tools declared for the bare-dialect shapes.
const TOOLS: &[&str] = &["search", "read_file"];

#[test]
fn many_thoughts() {
    // Each thought looked for the next <action> up to the end of the turn.
    let over = quadratic(&[
        ("thoughts", shape("", "<thought>x</thought>", ""), &[]),
        (
            "thoughts, then a cut-off <final_answer",
            shape("", "<thought>x</thought>", "<final_answer"),
            &[],
        ),
        (
            "thoughts before an action",
            shape("", "<thought>x</thought>", "<action>f()</action>"),
            &[],
        ),
        (
            "closing thoughts",
            shape("<thought>", "</thought>", ""),
            &[],
        ),
        ("unclosed thoughts", shape("", "<thought>x", ""), &[]),
        (
            "thoughts, then a model-written observation",
            shape("", "<thought>", "<observation>x"),
            &[],
        ),
    ]);
    assert!(over.is_empty(), "{over:#?}");
}

#[test]
fn many_think_blocks() {
    // Each removed block was sorted into the masks, every `<` compared with all of them, and
    // every unclosed `<think>` after text asked again whether the text before it was blank.
    let pairs = shape("", "<think>x</think> ", "");
    let over = quadratic(&[
        ("think pairs", shape("", "<think>x</think>", ""), &[]),
        ("unclosed think", shape("", "<think>", ""), &[]),
        ("lone closing think", shape("", "</think>", ""), &[]),
        (
            "think pairs, then thoughts",
            format!("{pairs}{}", shape("", "<thought>x</thought>", "")),
            &[],
        ),
        (
            "think pairs, then unclosed thinks after text",
            format!("{pairs}{}", shape("", "x<think>", "")),
            &[],
        ),
        (
            "think, thought, action",
            shape("", "<think><thought><action", ""),
            &[],
        ),
    ]);
    assert!(over.is_empty(), "{over:#?}");
}

#[test]
fn many_dialect_candidates() {
    // Each candidate was compared with every block of the turn.
    let over = quadratic(&[
        (
            "tool_call in thoughts",
            shape("", "<thought><tool_call></thought>", ""),
            &[],
        ),
        (
            "function_calls in thoughts",
            shape("", "<thought><function_calls></thought>", ""),
            &[],
        ),
        (
            "known tool in thoughts",
            shape("", "<thought><search></thought>", ""),
            TOOLS,
        ),
        ("tool_call", shape("", "<tool_call>", ""), &[]),
        ("bare known tool", shape("", "<search>", ""), TOOLS),
        (
            "invokes",
            shape("<function_calls>", "<invoke name=\"f\">", ""),
            &[],
        ),
    ]);
    assert!(over.is_empty(), "{over:#?}");
}

#[test]
fn other_shapes() {
    let over = quadratic(&[
        ("many <", shape("", "a<", ""), &[]),
        ("action openings", shape("", "<action", ""), &[]),
        ("action tags", shape("", "<action>", ""), &[]),
        ("fences", shape("", "```\nx\n```\n", ""), &[]),
        (
            "fenced turn",
            shape("```xml\n", "<thought>x</thought>\n", "```"),
            &[],
        ),
        (
            "xml in an action",
            shape("<action><search>", "<q>x</q>", "</search></action>"),
            &[],
        ),
    ]);
    assert!(over.is_empty(), "{over:#?}");
}
