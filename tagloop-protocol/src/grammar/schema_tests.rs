//! The linear constructions of `schema.rs` accept what the spelled-out ones did, and no more.

use serde_json::{Value, json};

use super::testkit::matches;
use super::*;

fn turn(tool: &Value) -> Grammar {
    turn_grammar(&TurnShape {
        tools: vec![ToolShape {
            name: "f",
            parameters: tool,
        }],
        output_schema: None,
        final_only: false,
        opened_thought: false,
        think: false,
        ..TurnShape::default()
    })
}

fn action(args: &str) -> String {
    format!("<thought>x</thought><action>f({args})</action>")
}

/// Every subset of `items`, in order.
fn subsets(items: &[&str]) -> Vec<Vec<String>> {
    (0..1u32 << items.len())
        .map(|bits| {
            (0..items.len())
                .filter(|i| bits & (1 << i) != 0)
                .map(|i| items[i].to_owned())
                .collect()
        })
        .collect()
}

#[test]
fn a_chain_of_optional_members_takes_any_of_them_in_order() {
    // Five optional members: past three they are a chain of rules.
    let names = ["a", "b", "c", "d", "e"];
    let props: serde_json::Map<String, Value> = names
        .iter()
        .map(|n| (n.to_string(), json!({"type": "integer"})))
        .collect();
    let schema = json!({"type": "object", "properties": props});
    let g = turn_grammar(&TurnShape {
        tools: vec![],
        output_schema: Some(&schema),
        final_only: false,
        opened_thought: false,
        think: false,
        ..TurnShape::default()
    });
    assert!(g.rules().iter().any(|(n, _)| n.starts_with("answer-from")));
    let answer =
        |body: &str| format!("<thought>x</thought><final_answer>{{{body}}}</final_answer>");
    for subset in subsets(&names) {
        let body: Vec<String> = subset.iter().map(|n| format!("\"{n}\": 1")).collect();
        assert!(matches(&g, &answer(&body.join(", "))), "{subset:?}");
    }
    for bad in [
        r#""b": 1, "a": 1"#,
        r#""a": 1, "a": 1"#,
        r#", "a": 1"#,
        r#""a": 1,"#,
        r#""a": 1,, "b": 1"#,
        r#""f": 1"#,
    ] {
        assert!(!matches(&g, &answer(bad)), "{bad}");
    }
    // The same for a tool's arguments.
    let g = turn(&schema);
    for subset in subsets(&names) {
        let args: Vec<String> = subset.iter().map(|n| format!("{n}=1")).collect();
        assert!(matches(&g, &action(&args.join(", "))), "{subset:?}");
    }
    for bad in ["b=1, a=1", "a=1, a=1", ", a=1", "a=1,"] {
        assert!(!matches(&g, &action(bad)), "{bad}");
    }
}

#[test]
fn a_long_positional_tail_takes_a_prefix_of_it() {
    // Names that are not identifiers make the arguments positional; five optional ones after
    // a required one are a chain of rules.
    let schema = json!({"type": "object", "properties": {
        "x-0": {"type": "integer"}, "x-1": {"type": "integer"}, "x-2": {"type": "integer"},
        "x-3": {"type": "integer"}, "x-4": {"type": "integer"}, "x-5": {"type": "integer"}},
        "required": ["x-0"]});
    let g = turn(&schema);
    assert!(g.rules().iter().any(|(n, _)| n.contains("-tail")));
    for n in 1..=6 {
        let args: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        assert!(matches(&g, &action(&args.join(", "))), "{n} values");
    }
    assert!(!matches(&g, &action("")));
    assert!(!matches(&g, &action("0, 1, 2, 3, 4, 5, 6")));
    assert!(!matches(&g, &action("0,")));
}

#[test]
fn a_sub_schema_too_large_accepts_any_value_and_is_noted() {
    // An enum of 40,000 long values is past the budget of one schema on its own.
    let values: Vec<String> = (0..40_000).map(|i| format!("value number {i}")).collect();
    let schema = json!({"type": "object", "properties": {
        "small": {"type": "integer"}, "huge": {"enum": values}}, "required": ["small"]});
    let g = turn_grammar(&TurnShape {
        tools: vec![],
        output_schema: Some(&schema),
        final_only: false,
        opened_thought: false,
        think: false,
        ..TurnShape::default()
    });
    let answer = |body: &str| format!("<thought>x</thought><final_answer>{body}</final_answer>");
    assert!(matches(
        &g,
        &answer(r#"{"small": 1, "huge": [true, null]}"#)
    ));
    assert!(
        !matches(&g, &answer(r#"{"huge": 1}"#)),
        "the rest is followed"
    );
    let [note] = g.simplified() else {
        panic!("{:?}", g.simplified());
    };
    assert_eq!(note.schema, "the output schema");
    assert_eq!(note.pointer, "/properties/huge");
    assert_eq!(note.parts, 1);
}
