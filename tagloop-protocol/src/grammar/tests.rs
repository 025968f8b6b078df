//! Whole turns: every string the grammar of a turn accepts reads back as an action that binds or
//! as a final answer that validates (sampled, against the reader as the oracle), the golden
//! grammars, and how tools are written into a turn. Single constructs are in `construct_tests.rs`.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::testkit::{matches, sample};
use super::turn::callable;
use super::*;
use crate::{Call, TurnKind, bind, parse_action_with, read_turn};

// ---- registries ---------------------------------------------------------------------------

fn read_file() -> Value {
    json!({"type": "object", "properties": {
        "path": {"type": "string"},
        "start_line": {"type": "integer"},
        "end_line": {"type": "integer"}},
        "required": ["path"]})
}

fn rich() -> Value {
    json!({"type": "object", "properties": {
        "mode": {"enum": ["fast", "slow \"quoted\""]},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
        "where": {"type": "object", "properties": {
            "x": {"type": "integer"}, "label": {"type": ["string", "null"]}},
            "required": ["x"]},
        "either": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "boolean"}}]},
        "anything": {},
        "fixed": {"const": "v1"}},
        "required": ["mode", "ratio"]})
}

fn no_params() -> Value {
    json!({"type": "object", "properties": {}})
}

fn odd_names() -> Value {
    json!({"type": "object", "properties": {
        "file-path": {"type": "string"}, "max count": {"type": "integer"}},
        "required": ["file-path"]})
}

fn all_optional() -> Value {
    json!({"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "boolean"}}})
}

/// An output schema with the keywords roles use.
fn person() -> Value {
    json!({"type": "object", "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "emails": {"type": "array", "items": {"type": "string"}},
        "kind": {"enum": ["a", "b"]},
        "address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "extra": {"$ref": "#/defs/x"}},
        "required": ["name", "age"]})
}

pub(super) struct Case {
    tools: Vec<(&'static str, Value)>,
    schema: Option<Value>,
}

pub(super) fn cases() -> Vec<Case> {
    vec![
        Case {
            tools: vec![("read_file", read_file())],
            schema: None,
        },
        Case {
            tools: vec![
                ("read_file", read_file()),
                ("fs.tune", rich()),
                ("now", no_params()),
                ("odd-tool", odd_names()),
                ("opt", all_optional()),
            ],
            schema: None,
        },
        Case {
            tools: vec![("read_file", read_file()), ("fs.tune", rich())],
            schema: Some(person()),
        },
        Case {
            tools: vec![],
            schema: Some(json!({"type": "array", "items": {"type": "number"}, "maxItems": 4})),
        },
    ]
}

/// The oracle: what the turn reader, the action parser and binding make of a sampled turn.
pub(super) fn check_turn(text: &str, case: &Case) -> Result<(), String> {
    let turn = read_turn(text);
    match turn.kind {
        TurnKind::Action => {
            let action = turn.action.as_deref().unwrap_or_default();
            let find = |name: &str| case.tools.iter().find(|(n, _)| *n == name);
            let accept = |c: &Call| find(&c.tool).is_some_and(|(_, p)| bind(&c.args, p).is_ok());
            let call = parse_action_with(action, &accept)
                .map_err(|e| format!("action does not parse: {e:?}\n{action}"))?;
            let (_, params) = find(&call.tool).ok_or(format!("unknown tool {}", call.tool))?;
            bind(&call.args, params).map_err(|e| format!("does not bind: {e}\n{action}"))?;
            Ok(())
        }
        TurnKind::Final => {
            let text = turn.final_text.as_deref().unwrap_or_default().trim();
            if text.is_empty() {
                return Err("empty final answer".into());
            }
            if let Some(schema) = &case.schema {
                let v: Value = serde_json::from_str(text)
                    .map_err(|e| format!("final is not JSON: {e}\n{text}"))?;
                let mut schema = schema.clone();
                if let Some(p) = schema.get_mut("properties").and_then(Value::as_object_mut) {
                    p.remove("extra");
                }
                let validator = jsonschema::validator_for(&schema).map_err(|e| e.to_string())?;
                if !validator.is_valid(&v) {
                    return Err(format!("final does not validate: {text}"));
                }
            }
            Ok(())
        }
        other => Err(format!("turn read as {other:?}")),
    }
}

pub(super) fn shape(case: &Case, final_only: bool, opened: bool, think: bool) -> TurnShape<'_> {
    TurnShape {
        tools: case
            .tools
            .iter()
            .map(|(name, parameters)| ToolShape { name, parameters })
            .collect(),
        output_schema: case.schema.as_ref(),
        final_only,
        opened_thought: opened,
        think,
        ..TurnShape::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Every turn the grammar accepts reads as an action that binds, or a valid final answer:
    /// as sampled, and with the closing tag stripped the way a server's stop string strips it.
    #[test]
    fn every_sampled_turn_reads_and_binds(
        which in 0usize..4, seed in any::<u64>(), final_only in any::<bool>(),
        opened in any::<bool>(), think in any::<bool>(),
    ) {
        let cases = cases();
        let case = &cases[which];
        let grammar = turn_grammar(&shape(case, final_only, opened, think));
        let sampled = sample(&grammar, seed);
        let text = if opened { format!("<thought>{sampled}") } else { sampled.clone() };
        if let Err(e) = check_turn(&text, case) {
            prop_assert!(false, "{e}\nturn: {text:?}");
        }
        for stop in ["</action>", "</final_answer>"] {
            if let Some(cut) = text.strip_suffix(stop)
                && let Err(e) = check_turn(cut, case)
            {
                prop_assert!(false, "{e}\nturn with its stop stripped: {cut:?}");
            }
        }
        if final_only {
            prop_assert_eq!(read_turn(&text).kind, TurnKind::Final);
        }
    }

    /// The GBNF text reads back as the very grammar it was written from.
    #[test]
    fn gbnf_text_reads_back_as_the_grammar(which in 0usize..4, final_only in any::<bool>(), think in any::<bool>()) {
        let cases = cases();
        let grammar = turn_grammar(&shape(&cases[which], final_only, false, think));
        let text = grammar.to_gbnf();
        let back = parse_gbnf(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(back.to_gbnf(), text);
    }

    /// The decision grammar (what a lazy grammar constrains after its trigger) yields the
    /// decision of a turn after any free text.
    #[test]
    fn lazy_decisions_read_after_free_reasoning(which in 0usize..4, seed in any::<u64>()) {
        let cases = cases();
        let case = &cases[which];
        let grammar = decision_grammar(&shape(case, false, false, false));
        let decision = sample(&grammar, seed);
        prop_assert!(LAZY_TRIGGERS.iter().any(|t| decision.starts_with(t)), "{}", decision);
        let text = format!("<think>free reasoning, even <b>tags</b></think><thought>ok</thought>{decision}");
        if let Err(e) = check_turn(&text, case) {
            prop_assert!(false, "{e}\nturn: {text:?}");
        }
    }
}

// ---- golden grammars ---------------------------------------------------------------------------

#[test]
fn golden_grammar_for_one_tool() {
    let case = &cases()[0];
    insta::assert_snapshot!(turn_grammar(&shape(case, false, false, false)).to_gbnf());
}

#[test]
fn golden_grammar_for_a_rich_registry_and_a_schema() {
    let case = &cases()[2];
    insta::assert_snapshot!(turn_grammar(&shape(case, false, true, true)).to_gbnf());
}

#[test]
fn golden_grammar_for_a_last_turn() {
    let case = &cases()[1];
    insta::assert_snapshot!(turn_grammar(&shape(case, true, false, false)).to_gbnf());
}

// ---- tools in a turn ---------------------------------------------------------------------------

#[test]
fn tools_take_required_arguments_first_and_optional_ones_in_order() {
    let params = read_file();
    let case = Case {
        tools: vec![("read_file", params)],
        schema: None,
    };
    let g = turn_grammar(&shape(&case, false, false, false));
    let t = |call: &str| format!("<thought>x</thought>\n<action>{call}</action>");
    assert!(matches(&g, &t(r#"read_file(path="a")"#)));
    assert!(matches(
        &g,
        &t(r#"read_file(path="a", start_line=3, end_line=4)"#)
    ));
    assert!(matches(&g, &t(r#"read_file(path="a",end_line=4)"#)));
    assert!(matches(&g, &t("read_file(path=\"\"\"a \"b\" c\"\"\")")));
    assert!(!matches(&g, &t(r#"read_file(start_line=3, path="a")"#)));
    assert!(!matches(&g, &t(r#"read_file(path="a", path="b")"#)));
    assert!(!matches(&g, &t(r#"read_file()"#)));
    assert!(!matches(&g, &t(r#"write_file(path="a")"#)));
    assert!(!matches(&g, &t(r#"read_file(path="a</action>")"#)));
    assert!(!matches(&g, &t(r#"read_file(path="a\q")"#)));
    assert!(matches(
        &g,
        "<thought>x</thought><final_answer>done</final_answer>"
    ));
    assert!(!matches(
        &g,
        "<thought>x</thought><final_answer> </final_answer>"
    ));
    assert!(!matches(
        &g,
        "<thought>a <b></thought><final_answer>x</final_answer>"
    ));
}

#[test]
fn tools_the_action_grammar_cannot_name_are_left_out() {
    assert!(callable("fs.read_file") && callable("my-tool") && callable("read_file"));
    assert!(!callable("bad name") && !callable("a/b") && !callable(""));
    let params = no_params();
    let case = Case {
        tools: vec![("a/b", params)],
        schema: None,
    };
    let text = turn_grammar(&shape(&case, false, false, false)).to_gbnf();
    assert!(!text.contains("<action>"), "{text}");
}

#[test]
fn a_tool_named_after_nothing_gets_a_rule_of_its_own() {
    // `call-_` sanitises to `call`, the name of the rule that lists every call: the tool's rule
    // must not take that name, or `call ::= call` replaces both and the grammar fails its check.
    for odd in ["_", "__", "_0"] {
        let case = Case {
            tools: vec![(odd, no_params()), ("read_file", read_file())],
            schema: None,
        };
        let g = turn_grammar(&shape(&case, false, false, false));
        let text = g.to_gbnf();
        assert!(
            parse_gbnf(&text).is_ok(),
            "{odd}: {:?}\n{text}",
            parse_gbnf(&text)
        );
        let t = |call: &str| format!("<thought>x</thought><action>{call}</action>");
        assert!(matches(&g, &t(&format!("{odd}()"))), "{odd}\n{text}");
        assert!(matches(&g, &t(r#"read_file(path="a")"#)), "{odd}\n{text}");
    }
}

#[test]
fn every_tag_inside_a_string_or_an_answer_is_refused_or_read_back_as_written() {
    let case = Case {
        tools: vec![(
            "f",
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}),
        )],
        schema: None,
    };
    let g = turn_grammar(&shape(&case, false, false, false));
    for name in [
        "thought",
        "think",
        "action",
        "final_answer",
        "observation",
        "question",
    ] {
        for tag in [
            format!("<{name}>"),
            format!("</{name}>"),
            format!("</{}>", name.to_uppercase()),
        ] {
            let inner = format!("1 {tag} 2");
            let action = format!("<thought>x</thought><action>f(a=\"{inner}\")</action>");
            if matches(&g, &action) {
                let turn = read_turn(&action);
                let call = crate::parse_action(turn.action.as_deref().unwrap_or(""));
                let value = call
                    .ok()
                    .and_then(|c| c.args.first().map(|a| a.value.clone()));
                assert_eq!(value, Some(json!(inner)), "{action}");
                let stops = crate::STOP_SEQUENCES;
                assert!(!stops.iter().any(|s| inner.contains(s)), "{action}");
            }
            let fin = format!("<thought>x</thought><final_answer>{inner}</final_answer>");
            if matches(&g, &fin) {
                assert_eq!(
                    read_turn(&fin).final_text.as_deref(),
                    Some(inner.as_str()),
                    "{fin}"
                );
            }
        }
    }
    // The ones that matter are refused.
    let refused = |inner: &str| {
        !matches(
            &g,
            &format!("<thought>x</thought><action>f(a=\"{inner}\")</action>"),
        )
    };
    assert!(refused("</action>") && refused("</ACTION>") && refused("<observation>"));
    assert!(refused("<think>") && refused("</think>") && refused("</final_answer>"));
    assert!(!refused("<thought>") && !refused("<question>") && !refused("<b>"));
}

/// The prompt's markup a model copies back after its answer when it does not stop (gemma wrote
/// on into `</observation>`, `<question>` and the worked examples): no free answer spells it.
pub(super) const MARKUP_AFTER_AN_ANSWER: [&str; 10] = [
    "<observation>",
    "</observation>",
    "</OBSERVATION>",
    "<question>",
    "</question>",
    "<Question>",
    "=== Task 2 ===",
    "<action>",
    "<thought>",
    "</thought>",
];

/// Answers with `<`, `/` and `=` that are no markup of the prompt, near misses included.
pub(super) const ORDINARY_ANSWERS: [&str; 8] = [
    "x < y and y/2 > 1",
    "<b>bold</b> and a/b",
    "see </observe> here",
    "<quest> is no tag of ours",
    "<answer>42</answer>",
    "a == b, === Notes ===",
    "1 </ 2 <",
    "port = 8080",
];

/// The final answer of a turn, with some text before and after `inner`.
pub(super) fn final_turn(inner: &str) -> String {
    format!("<thought>x</thought><final_answer>The port is 8080.\n\n{inner}\nmore</final_answer>")
}

#[test]
fn a_free_answer_cannot_spell_the_prompts_markup_but_may_hold_other_tags() {
    for case in [&cases()[0], &cases()[1]] {
        for final_only in [false, true] {
            let g = turn_grammar(&shape(case, final_only, false, false));
            for word in MARKUP_AFTER_AN_ANSWER {
                assert!(!matches(&g, &final_turn(word)), "{word}");
            }
            for inner in ORDINARY_ANSWERS {
                let text = final_turn(inner);
                assert!(matches(&g, &text), "{inner}");
                check_turn(&text, case).unwrap();
            }
        }
    }
}

// ---- the shape of the thought -------------------------------------------------------------------

/// How models leave their thought: every one of these is a turn the grammar lets them finish as
/// written (issue 24: a turn held in its thought is pushed to invent more of it).
#[test]
fn a_thought_may_end_the_way_models_end_it() {
    let case = &cases()[0];
    let plain = turn_grammar(&shape(case, false, false, false));
    let opened = turn_grammar(&shape(case, false, true, false));
    let act = r#"<action>read_file(path="a")</action>"#;
    for thought in [
        "I will read it.",
        "I will read it.\n",
        "I will read it.\n\n",
        "I will read it.</thought>",
        "I will read it.</thought>\n",
        "I will read it.</thought>\n\n",
        "I will read it.\n</thought>\n",
        "\nOn the line after the tag.\n</thought>\n",
        "two  spaces\tand a tab.",
        "</thought>",
        "",
    ] {
        let whole = format!("<thought>{thought}{act}");
        assert!(matches(&plain, &whole), "{whole:?}");
        assert!(matches(&opened, &format!("{thought}{act}")), "{whole:?}");
        if let Err(e) = check_turn(&whole, case) {
            panic!("{e}\n{whole:?}");
        }
        let fin = format!("{thought}<final_answer>done</final_answer>");
        assert!(matches(&opened, &fin), "{fin:?}");
    }
    // No thought at all, straight to the decision.
    assert!(matches(&plain, act));
}

/// A newline ends the thought: a model that wants to stop after its sentence (its
/// end-of-sequence masked until the grammar is complete) reaches a decision instead of writing
/// the same line again and again (gemma wrote `10\n10\n10…` for 144 tokens under the grammar
/// that allowed a newline inside the thought).
#[test]
fn a_newline_leaves_only_the_decision() {
    let case = &cases()[0];
    let g = turn_grammar(&shape(case, false, false, false));
    let act = r#"<action>read_file(path="a")</action>"#;
    assert!(matches(&g, &format!("<thought>a.  b.\t{act}")));
    for held in [
        "10\n10",
        "a.\n\nb.",
        "a.\n \nb.",
        "a.   b.",
        "a.</thought>b.",
    ] {
        assert!(!matches(&g, &format!("<thought>{held}{act}")), "{held:?}");
    }
    // Nor may the blanks before the decision go on and on.
    assert!(!matches(&g, &format!("<thought>a.\n\n\n\n{act}")));
    assert!(!matches(&g, &format!("<thought>a.</thought>\n\n\n\n{act}")));
}

/// The thought's length is the turn budget's business, not the grammar's: no counted repetition
/// in the thought's rules (llama.cpp writes `x{1,400}` out as 400 rules), and a long thought is
/// accepted.
#[test]
fn the_thought_is_bounded_by_the_budget_not_by_counted_repetitions() {
    for case in &cases() {
        for (opened, think) in [(false, false), (true, false), (false, true)] {
            let text = turn_grammar(&shape(case, false, opened, think)).to_gbnf();
            for line in text.lines().filter(|l| {
                l.starts_with("thought") || l.starts_with("think") || l.starts_with("root")
            }) {
                let counts: Vec<u32> = line
                    .split('{')
                    .skip(1)
                    .filter_map(|c| c.split('}').next())
                    .flat_map(|c| c.split(','))
                    .filter_map(|n| n.trim().parse().ok())
                    .collect();
                assert!(counts.iter().all(|&n| n <= 3), "{line}");
            }
        }
    }
    let case = &cases()[0];
    let g = turn_grammar(&shape(case, false, false, true));
    // Longer than the 400 characters the grammar used to count (the matcher recurses per
    // character, so not much longer).
    let long = "word ".repeat(120);
    assert!(long.len() > 400);
    let think = "reasoning ".repeat(50);
    let turn = format!(
        "<think>{think}</think>\n<thought>{}</thought>\n<final_answer>ok</final_answer>",
        long.trim_end()
    );
    assert!(matches(&g, &turn));
}
