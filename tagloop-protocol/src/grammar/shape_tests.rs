//! Every variant of the turn grammar a [`TurnShape`] asks for: its GBNF reads back as the same
//! grammar, and a turn of each kind matches it or not as the variant says, in the grammar tree
//! (the testkit's matcher) and in llguidance's Lark alike.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::lark_tests::accepts;
use super::testkit::{matches, sample};
use super::tests::{cases, check_turn, shape};
use super::*;
use crate::{TurnKind, read_turn};

fn params() -> [Value; 2] {
    [
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
        json!({"type": "object", "properties": {}}),
    ]
}

fn tools(p: &[Value; 2]) -> Vec<ToolShape<'_>> {
    vec![
        ToolShape {
            name: "add",
            parameters: &p[0],
        },
        ToolShape {
            name: "sub",
            parameters: &p[1],
        },
    ]
}

const ANSWER: &str = "<thought>I know.</thought>\n<final_answer>4</final_answer>";
const ADD: &str = "<thought>Add.</thought>\n<action>add(a=1)</action>";
const SUB: &str = "<thought>Sub.</thought>\n<action>sub()</action>";
const TWO: &str = "<thought>Both.</thought>\n<action>add(a=1)</action>\n<action>sub()</action>";
const TWO_OPEN_LAST: &str = "<thought>Both.</thought>\n<action>add(a=1)</action>\n<action>sub()";
const TWO_OPEN_FIRST: &str = "<thought>Both.</thought>\n<action>add(a=1)\n<action>sub()</action>";
const THREE: &str = "<action>add(a=1)</action><action>add(a=2)</action> <action>sub()</action>";

/// The grammar of `shape`, checked: its GBNF reads back as the same text, and its Lark form
/// accepts exactly what the tree accepts for each of `turns`.
fn checked(shape: &TurnShape<'_>, turns: &[&str]) -> Grammar {
    let g = turn_grammar(shape);
    let text = g.to_gbnf();
    let back = parse_gbnf(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back.to_gbnf(), text);
    for turn in turns {
        assert_eq!(
            matches(&g, turn),
            accepts(&g, turn).is_ok(),
            "GBNF and Lark disagree on {turn:?}"
        );
    }
    g
}

const ALL: [&str; 7] = [ANSWER, ADD, SUB, TWO, TWO_OPEN_LAST, TWO_OPEN_FIRST, THREE];

#[test]
fn an_ordinary_step_calls_once_or_answers() {
    let p = params();
    let g = checked(&TurnShape::new(tools(&p)), &ALL);
    assert!(matches(&g, ANSWER) && matches(&g, ADD) && matches(&g, SUB));
    assert!(!matches(&g, TWO), "one call per turn");
}

#[test]
fn a_required_call_leaves_no_answer() {
    let p = params();
    let g = checked(&TurnShape::new(tools(&p)).call_required(true), &ALL);
    assert!(matches(&g, ADD) && matches(&g, SUB));
    assert!(!matches(&g, ANSWER));
    assert!(!g.to_gbnf().contains("<final_answer>"), "{}", g.to_gbnf());
}

#[test]
fn a_named_tool_is_the_only_call() {
    let p = params();
    let g = checked(&TurnShape::new(tools(&p)).named("sub"), &ALL);
    assert!(matches(&g, SUB));
    assert!(!matches(&g, ADD) && !matches(&g, ANSWER));
    assert!(!g.to_gbnf().contains("\"add(\""));
}

#[test]
fn answer_only_wins_over_a_required_call() {
    let p = params();
    let shape = TurnShape::new(tools(&p))
        .call_required(true)
        .final_only(true);
    let g = checked(&shape, &ALL);
    assert!(matches(&g, ANSWER));
    assert!(!matches(&g, ADD));
    assert!(!g.to_gbnf().contains("<action>"));
}

/// How the runtime begins the thought of the answer after a declined call, in the tests.
const BEGUN: &str = "Without any tool, from what I know:";

#[test]
fn a_begun_thought_starts_with_the_runtimes_words_and_goes_on_with_the_models() {
    let p = params();
    let led = format!("<thought>{BEGUN} 2 and 2 make 4.</thought>\n<final_answer>4</final_answer>");
    let bare = format!("<thought>{BEGUN}</thought>\n<final_answer>4</final_answer>");
    let mut turns = ALL.to_vec();
    turns.extend([led.as_str(), bare.as_str()]);
    let shape = TurnShape::new(tools(&p))
        .final_only(true)
        .thought(ThoughtShape::Begun(BEGUN));
    let g = checked(&shape, &turns);
    assert!(matches(&g, &led));
    // Closed at once, the thought was no help (the 1.5B still answered "yellow").
    assert!(!matches(&g, &bare));
    // The thought the model wrote before its call is no longer allowed, nor is a call, nor an
    // answer without the thought.
    assert!(!matches(&g, ANSWER) && !matches(&g, ADD));
    assert!(!matches(&g, "<final_answer>4</final_answer>"));
    for seed in 0..20 {
        let turn = read_turn(&sample(&g, seed));
        assert_eq!(turn.kind, TurnKind::Final);
        let thought = turn.thought.unwrap_or_default();
        assert!(thought.starts_with(BEGUN), "{thought:?}");
    }
    // Where the prompt opened the thought (completions), the turn starts inside it.
    let opened = checked(&shape.clone().opened_thought(true), &[]);
    assert!(matches(
        &opened,
        &format!("{BEGUN} it is 4.</thought>\n<final_answer>4")
    ));
    assert!(!matches(&opened, &led));
    assert!(!matches(&opened, "I know.</thought>\n<final_answer>4"));
    // A reasoning model may still reason first.
    let think = checked(&shape.think(true), &[]);
    assert!(matches(&think, &format!("<think>Hm.</think>\n{led}")));
}

#[test]
fn a_begun_thought_that_a_turn_cannot_hold_is_left_to_the_model() {
    let p = params();
    let answer_only = turn_grammar(&TurnShape::new(tools(&p)).final_only(true)).to_gbnf();
    for text in ["", "  ", "two\nlines", "a <tag> inside"] {
        let shape = TurnShape::new(tools(&p))
            .final_only(true)
            .thought(ThoughtShape::Begun(text));
        let g = checked(&shape, &ALL);
        assert!(matches(&g, ANSWER), "{text:?}");
        assert_eq!(g.to_gbnf(), answer_only, "{text:?}");
    }
}

#[test]
fn without_a_thought_the_turn_begins_at_its_decision() {
    let p = params();
    let (call, answer) = (
        "<action>add(a=1)</action>",
        "<final_answer>4</final_answer>",
    );
    let (two, reasoned) = (
        "<action>add(a=1)</action>\n<action>sub()",
        "<think>Hm.</think>\n<action>add(a=1)</action>",
    );
    let (closed, unclosed, worded) = (
        "</thought>\n<action>add(a=1)</action>",
        "<action>add(a=1)",
        "I add.</thought>\n<action>add(a=1)",
    );
    let mut turns = ALL.to_vec();
    turns.extend([call, answer, two, reasoned, closed, unclosed, worded]);
    let shape = TurnShape::new(tools(&p)).thought(ThoughtShape::None);
    let g = checked(&shape, &turns);
    assert!(matches(&g, call) && matches(&g, answer));
    assert!(
        !matches(&g, ADD) && !matches(&g, ANSWER),
        "a thought is refused"
    );
    // No rule of a thought is left in it, used or not.
    assert!(!g.to_gbnf().contains("thought"), "{}", g.to_gbnf());
    for seed in 0..20 {
        let turn = read_turn(&sample(&g, seed));
        assert!(matches!(turn.kind, TurnKind::Action | TurnKind::Final));
        assert_eq!(turn.thought, None);
    }
    // The other parts of the shape still hold.
    let required = checked(&shape.clone().call_required(true).max_calls(2), &turns);
    assert!(matches(&required, two) && !matches(&required, answer));
    // A reasoning model may still reason first, in its `<think>` block.
    let think = checked(&shape.clone().think(true), &turns);
    assert!(matches(&think, reasoned) && matches(&think, call));
    assert!(!matches(&think, &format!("<think>Hm.</think>\n{ADD}")));
    // A thought the prompt opened is closed at once, with nothing in it (the reader ends an
    // open thought at the decision's tag, so its closing tag may be left out).
    let opened = checked(&shape.opened_thought(true), &turns);
    assert!(matches(&opened, closed) && matches(&opened, unclosed));
    assert!(!matches(&opened, worded) && !matches(&opened, ADD));
    for seed in 0..20 {
        let turn = read_turn(&format!("<thought>{}", sample(&opened, seed)));
        assert!(matches!(turn.kind, TurnKind::Action | TurnKind::Final));
        assert_eq!(turn.thought.unwrap_or_default(), "");
    }
}

#[test]
fn parallel_calls_are_closed_blocks_up_to_the_limit() {
    let p = params();
    let g = checked(&TurnShape::new(tools(&p)).max_calls(2), &ALL);
    assert!(matches(&g, ADD) && matches(&g, ANSWER));
    assert!(matches(&g, TWO) && matches(&g, TWO_OPEN_LAST));
    assert!(
        !matches(&g, TWO_OPEN_FIRST),
        "every block but the last is closed"
    );
    assert!(!matches(&g, THREE), "no more than the limit");
    let g = checked(&TurnShape::new(tools(&p)).max_calls(3), &ALL);
    assert!(matches(&g, THREE));
}

#[test]
fn parallel_and_required_together() {
    let p = params();
    let shape = TurnShape::new(tools(&p)).max_calls(8).call_required(true);
    let g = checked(&shape, &ALL);
    assert!(matches(&g, TWO) && matches(&g, THREE) && matches(&g, ADD));
    assert!(!matches(&g, ANSWER));
}

#[test]
fn no_callable_tool_leaves_an_answer_even_when_a_call_is_required() {
    let p = params();
    let g = checked(
        &TurnShape::new(tools(&p)).named("nowhere").max_calls(4),
        &ALL,
    );
    assert!(matches(&g, ANSWER));
    assert!(!matches(&g, SUB));
}

#[test]
fn the_decision_grammar_follows_the_shape_too() {
    let p = params();
    let g = decision_grammar(&TurnShape::new(tools(&p)).max_calls(2).call_required(true));
    parse_gbnf(&g.to_gbnf()).unwrap();
    assert!(matches(&g, "<action>add(a=1)</action>\n<action>sub()"));
    assert!(!matches(&g, "<final_answer>4</final_answer>"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every turn a parallel (and maybe required) grammar accepts reads, block after block as
    /// serve's reader reads it, as at most `max` actions that each parse and bind; a required
    /// call's turn is never an answer (where a tool can be called at all).
    #[test]
    fn every_sampled_parallel_turn_reads_as_calls_that_bind(
        which in 0usize..4, seed in any::<u64>(), max in 2usize..5, required in any::<bool>(),
    ) {
        let cases = cases();
        let case = &cases[which];
        let shape = shape(case, false, false, false)
            .max_calls(max)
            .call_required(required);
        let grammar = turn_grammar(&shape);
        // A case without a callable tool can only answer, required or not.
        let calls = grammar.to_gbnf().contains("<action>");
        let text = sample(&grammar, seed);
        if let Err(e) = check_turn(&text, case) {
            prop_assert!(false, "{e}\nturn: {text:?}");
        }
        let first = read_turn(&text);
        if required && calls {
            prop_assert_eq!(first.kind, TurnKind::Action, "{}", text);
        }
        let mut blocks = usize::from(first.kind == TurnKind::Action);
        let mut rest = &text[first.history_end.min(text.len())..];
        while first.kind == TurnKind::Action && rest.trim_start().starts_with("<action>") {
            let next = read_turn(rest);
            prop_assert_eq!(next.kind, TurnKind::Action, "{}", text);
            if let Err(e) = check_turn(rest, case) {
                prop_assert!(false, "{e}\nblock {}: {rest:?}", blocks + 1);
            }
            blocks += 1;
            rest = &rest[next.history_end.min(rest.len())..];
        }
        prop_assert!(blocks <= max, "{blocks} blocks of {max}: {text:?}");
        prop_assert!(rest.trim().is_empty(), "left unread: {rest:?}");
    }
}
