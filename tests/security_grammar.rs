//! Issue 21, item 2: a small schema must not explode the grammar.
//!
//! A role's output schema, a queued task's inline role and an MCP tool's input schema all come
//! from outside, and each is turned into grammar on the first turn of a run. These tests hold
//! the grammar to sizes and rule counts (never to times): linear in the schema, capped in all,
//! the part past the cap accepting any JSON value and said so, and every grammar still passing
//! the check it must pass before it is sent (`parse_gbnf`, llama.cpp's rules).
//!
//! The explosive schemas of the issue (22 nested arrays: 3 GB) are used here at a depth where
//! the old builder was merely too large, so a regression fails quickly instead of swapping.

use serde_json::{Value, json};
use tagloop::protocol::{Grammar, ToolShape, TurnShape, parse_gbnf, turn_grammar};

/// What the rules of one schema may take, plus the fixed rules of a turn (strings that cannot
/// spell a tag, numbers, any JSON value, the thought): the grammar's size is capped by it.
const CAPPED_GRAMMAR: usize = 128 * 1024 + 32 * 1024;

fn role_grammar(schema: &Value) -> Grammar {
    turn_grammar(&TurnShape {
        tools: vec![],
        output_schema: Some(schema),
        final_only: false,
        opened_thought: false,
        think: false,
        ..TurnShape::default()
    })
}

fn tool_grammar(parameters: &Value) -> Grammar {
    turn_grammar(&TurnShape {
        tools: vec![ToolShape {
            name: "t",
            parameters,
        }],
        output_schema: None,
        final_only: false,
        opened_thought: false,
        think: false,
        ..TurnShape::default()
    })
}

/// The GBNF text, after checking it reads back as llama.cpp would take it.
fn checked(g: &Grammar) -> String {
    let text = g.to_gbnf();
    if let Err(e) = parse_gbnf(&text) {
        panic!("the grammar fails its check: {e}");
    }
    text
}

fn nested_arrays(levels: usize) -> Value {
    let mut s = json!({"type": "string"});
    for _ in 0..levels {
        s = json!({"type": "array", "items": s});
    }
    s
}

/// Objects inside objects, each with an optional member beside the nested one (no member is
/// required, so the old builder wrote each one once per "which comes first" choice).
fn nested_objects(levels: usize) -> Value {
    let mut s = json!({"type": "string"});
    for _ in 0..levels {
        s = json!({"type": "object", "properties": {"note": {"type": "string"}, "next": s}});
    }
    s
}

fn optional_properties(n: usize) -> Value {
    let props: serde_json::Map<String, Value> = (0..n)
        .map(|i| (format!("p{i}"), json!({"type": "integer"})))
        .collect();
    json!({"type": "object", "properties": props})
}

/// Doubling the levels (or members) about doubles the grammar: it adds about as much as the
/// first ones took (a quarter more for longer names: `p1000` is longer than `p100`), where an
/// exponential or quadratic builder adds several times that.
fn grows_linearly(make: impl Fn(usize) -> Value, grammar: impl Fn(&Value) -> Grammar, n: usize) {
    let small = checked(&grammar(&make(n)));
    let large = checked(&grammar(&make(2 * n)));
    let step = large.len().saturating_sub(small.len());
    assert!(
        step * 4 <= small.len() * 5,
        "{n} more levels added {step} bytes to a grammar of {} bytes",
        small.len()
    );
}

#[test]
fn nested_arrays_make_one_rule_per_level() {
    let g = role_grammar(&nested_arrays(12));
    let text = checked(&g);
    let fixed = checked(&role_grammar(&json!({"type": "string"}))).len();
    // Each level is one rule of about 80 bytes; the old builder copied the item twice per level
    // (2^12 copies of the innermost string).
    assert!(
        text.len() < fixed + 12 * 200,
        "{} bytes for 12 nested arrays",
        text.len()
    );
    assert!(g.rule_count() < 200, "{} rules", g.rule_count());
    grows_linearly(nested_arrays, role_grammar, 8);
    assert!(g.simplified().is_empty(), "{:?}", g.simplified());
}

#[test]
fn nested_objects_with_an_optional_member_make_one_rule_per_level() {
    let g = role_grammar(&nested_objects(12));
    let text = checked(&g);
    let fixed = checked(&role_grammar(&json!({"type": "string"}))).len();
    assert!(
        text.len() < fixed + 12 * 300,
        "{} bytes for 12 nested objects",
        text.len()
    );
    grows_linearly(nested_objects, role_grammar, 8);
    assert!(g.simplified().is_empty(), "{:?}", g.simplified());
}

#[test]
fn many_optional_properties_make_a_linear_grammar() {
    // 300 optional members: the old builder wrote 45,150 of them (about 1.5 MB of GBNF).
    let g = role_grammar(&optional_properties(300));
    let text = checked(&g);
    assert!(
        text.len() < 300 * 200 + 32 * 1024,
        "{} bytes for 300 optional properties",
        text.len()
    );
    grows_linearly(optional_properties, role_grammar, 300);
    assert!(g.simplified().is_empty(), "{:?}", g.simplified());
}

#[test]
fn a_tool_with_many_optional_parameters_makes_a_linear_grammar() {
    let g = tool_grammar(&optional_properties(300));
    let text = checked(&g);
    assert!(
        text.len() < 300 * 200 + 32 * 1024,
        "{} bytes for a tool of 300 optional parameters",
        text.len()
    );
    grows_linearly(optional_properties, tool_grammar, 300);
}

/// An array with a bound whose items are objects with many optional members: the old builder
/// wrote the item inside a repeated group, which llama.cpp refuses past 2,000 synthesized rules
/// (so the grammar was never sent).
#[test]
fn bounded_arrays_of_rich_objects_make_a_grammar_llama_cpp_takes() {
    let mut props = serde_json::Map::new();
    props.insert("id".into(), json!({"type": "integer"}));
    for i in 0..40 {
        props.insert(format!("f{i}"), json!({"type": "string"}));
    }
    let item = json!({"type": "object", "properties": props, "required": ["id"]});
    let schema = json!({"type": "array", "items": item, "maxItems": 64});
    checked(&role_grammar(&schema));
}

#[test]
fn the_explosive_schemas_of_the_issue_stay_small() {
    for (what, schema) in [
        ("22 nested arrays", nested_arrays(22)),
        ("20 nested objects", nested_objects(20)),
        ("1,500 optional properties", optional_properties(1500)),
    ] {
        for g in [role_grammar(&schema), tool_grammar(&schema)] {
            let text = checked(&g);
            assert!(text.len() <= CAPPED_GRAMMAR, "{what}: {} bytes", text.len());
            assert!(g.rule_count() < 4000, "{what}: {} rules", g.rule_count());
        }
    }
}

/// A schema of about 1 MB in a realistic mix (objects, arrays of objects, enums, anyOf): past
/// the cap its last parts accept any JSON value, the first ones are kept, and it is said where.
fn big_schema() -> Value {
    let leaf = |i: usize| match i % 6 {
        0 => json!({"type": "string", "description": "a field of the record"}),
        1 => json!({"type": "integer"}),
        2 => json!({"enum": ["draft", "open", "closed"]}),
        3 => json!({"anyOf": [{"type": "number"}, {"type": "null"}]}),
        4 => json!({"type": "array", "items": {"type": "string"}, "maxItems": 8}),
        _ => json!({"type": "boolean"}),
    };
    let record = |s: usize| {
        let mut props = serde_json::Map::new();
        for i in 0..12 {
            props.insert(format!("field_{s}_{i}"), leaf(i));
        }
        let mut inner = serde_json::Map::new();
        for i in 0..8 {
            inner.insert(format!("sub_{s}_{i}"), leaf(i + s));
        }
        props.insert(
            format!("items_{s}"),
            json!({"type": "array", "items": {"type": "object", "properties": inner,
                "required": [format!("sub_{s}_0")]}, "maxItems": 20}),
        );
        json!({"type": "object", "properties": props, "required": [format!("field_{s}_0")]})
    };
    let mut sections = serde_json::Map::new();
    let mut s = 0;
    while serde_json::to_string(&sections).map_or(0, |t| t.len()) < 1_000_000 {
        // Measured every 50 sections: the loop stays linear.
        for _ in 0..50 {
            sections.insert(format!("section_{s}"), record(s));
            s += 1;
        }
    }
    json!({"type": "object", "properties": sections, "required": ["section_0"]})
}

#[test]
fn a_one_megabyte_schema_is_capped_kept_in_front_and_reported() {
    let schema = big_schema();
    for (label, g) in [
        ("the output schema", role_grammar(&schema)),
        ("the parameters of tool `t`", tool_grammar(&schema)),
    ] {
        let text = checked(&g);
        assert!(
            text.len() <= CAPPED_GRAMMAR,
            "{label}: {} bytes",
            text.len()
        );
        // The first sections are followed, member by member.
        assert!(
            text.contains("field_0_1"),
            "{label}: the first section was dropped"
        );
        let [note] = g.simplified() else {
            panic!("{label}: {:?}", g.simplified());
        };
        assert_eq!(note.schema, label);
        assert!(note.parts > 0);
        assert!(
            note.pointer.starts_with("/properties/section_"),
            "{label}: {}",
            note.pointer
        );
        assert!(note.to_string().contains("accept any JSON value"), "{note}");
    }
}

#[test]
fn a_tool_whose_parameters_alone_exceed_the_cap_takes_any_named_arguments() {
    // 20,000 required parameters: not even the names fit; the call stays a call.
    let props: serde_json::Map<String, Value> = (0..20_000)
        .map(|i| (format!("parameter_number_{i}"), json!({"type": "integer"})))
        .collect();
    let names: Vec<String> = props.keys().cloned().collect();
    let params = json!({"type": "object", "properties": props, "required": names});
    let g = tool_grammar(&params);
    let text = checked(&g);
    assert!(text.len() <= CAPPED_GRAMMAR, "{} bytes", text.len());
    assert!(text.contains("\"t(\""), "{text}");
    let [note] = g.simplified() else {
        panic!("{:?}", g.simplified());
    };
    assert_eq!(note.pointer, "");
    assert!(note.to_string().contains("the whole schema"), "{note}");
}

#[test]
fn many_tools_share_one_cap() {
    // Eight tools whose parameters each fill most of a schema's budget: the grammar as a whole
    // stays capped, and every tool is still callable.
    let params = optional_properties(600);
    let names: Vec<String> = (0..8).map(|i| format!("tool_{i}")).collect();
    let g = turn_grammar(&TurnShape {
        tools: names
            .iter()
            .map(|n| ToolShape {
                name: n,
                parameters: &params,
            })
            .collect(),
        output_schema: None,
        final_only: false,
        opened_thought: false,
        think: false,
        ..TurnShape::default()
    });
    let text = checked(&g);
    assert!(text.len() <= 512 * 1024 + 32 * 1024, "{} bytes", text.len());
    for n in &names {
        assert!(text.contains(&format!("\"{n}(\"")), "{n} is not callable");
    }
    assert!(!g.simplified().is_empty());
}
