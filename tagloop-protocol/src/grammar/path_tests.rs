//! Path-valued parameters: limited to the known paths (escaped as the reader reads them back),
//! free strings without paths or when the list does not fit the budget, and every grammar
//! still read back by the GBNF checker.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::testkit::{matches, sample};
use super::*;
use crate::{TurnKind, bind, parse_action_with, read_turn};

/// `read_file(path)` (a file), `list_dir(path?)` (a folder), `search_files(pattern, path?)`
/// (either), annotated as an MCP server would annotate them.
fn tools() -> Vec<(&'static str, Value)> {
    let p = |kind: &str| json!({"type": "string", PATH_ANNOTATION: kind});
    vec![
        (
            "read_file",
            json!({"type": "object", "properties": {"path": p("file")}, "required": ["path"]}),
        ),
        (
            "list_dir",
            json!({"type": "object", "properties": {"path": p("dir")}}),
        ),
        (
            "search_files",
            json!({"type": "object", "properties": {
                "pattern": {"type": "string"}, "path": p("any")}, "required": ["pattern"]}),
        ),
    ]
}

fn grammar(tools: &[(&'static str, Value)], paths: &KnownPaths) -> Grammar {
    let shape = TurnShape {
        tools: tools
            .iter()
            .map(|(name, parameters)| ToolShape { name, parameters })
            .collect(),
        output_schema: None,
        final_only: false,
        opened_thought: false,
        think: false,
        ..TurnShape::default()
    };
    turn_grammar_with(&shape, paths)
}

/// Odd names: quotes, a backslash, unicode, spaces, and a folder `x<` holding `action`, whose
/// path spells a closing tag.
fn odd() -> KnownPaths {
    KnownPaths::new(
        vec![
            "notes/april.md".into(),
            "say \"hi\".txt".into(),
            "back\\slash".into(),
            "日本/über.md".into(),
            "x</action".into(),
        ],
        vec![".".into(), "notes".into(), "日本".into(), "x<".into()],
    )
}

/// The tool and the bound arguments of a turn's call, read back as the reader reads them.
fn call_of(text: &str) -> Option<(String, serde_json::Map<String, Value>)> {
    let turn = read_turn(text);
    if turn.kind != TurnKind::Action {
        return None;
    }
    let call = parse_action_with(turn.action.as_deref().unwrap_or(""), &|_| true)
        .unwrap_or_else(|e| panic!("{e:?}: {text:?}"));
    let tools = tools();
    let (_, params) = tools
        .iter()
        .find(|(n, _)| *n == call.tool)
        .expect("a known tool");
    let args = bind(&call.args, params).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    Some((call.tool, args))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Every path a sampled turn names exists, of the parameter's kind, exactly as listed.
    #[test]
    fn sampled_paths_always_exist(seed in any::<u64>()) {
        let known = odd();
        let g = grammar(&tools(), &known);
        let text = sample(&g, seed);
        if let Some((tool, args)) = call_of(&text) {
            let path = args.get("path").map(|v| v.as_str().unwrap_or("not a string"));
            let allowed: Vec<&String> = match tool.as_str() {
                "read_file" => known.files().iter().collect(),
                "list_dir" => known.dirs().iter().collect(),
                _ => known.dirs().iter().chain(known.files()).collect(),
            };
            if let Some(p) = path {
                prop_assert!(allowed.iter().any(|a| a.as_str() == p), "{p:?} in {text:?}");
            }
        }
    }
}

#[test]
fn the_model_writes_the_real_path() {
    let g = grammar(&tools(), &odd());
    let t = |call: &str| format!("<thought>x</thought>\n<action>{call}</action>");
    assert!(matches(&g, &t(r#"read_file(path="notes/april.md")"#)));
    assert!(!matches(&g, &t(r#"read_file(path="april.md")"#)));
    // A folder is no file, and a file no folder.
    assert!(!matches(&g, &t(r#"read_file(path="notes")"#)));
    assert!(matches(&g, &t(r#"list_dir(path=".")"#)));
    assert!(!matches(&g, &t(r#"list_dir(path="notes/april.md")"#)));
    assert!(matches(
        &g,
        &t(r#"search_files(pattern="a", path="notes")"#)
    ));
    assert!(matches(
        &g,
        &t(r#"search_files(pattern="a", path="notes/april.md")"#)
    ));
    // Escaped as the reader reads them back; the tag-spelling path with its `<` escaped.
    assert!(matches(&g, &t(r#"read_file(path="say \"hi\".txt")"#)));
    assert!(matches(&g, &t(r#"read_file(path="back\\slash")"#)));
    assert!(matches(&g, &t(r#"read_file(path="日本/über.md")"#)));
    assert!(matches(&g, &t(r#"read_file(path="x\u003c/action")"#)));
    assert!(!matches(&g, &t(r#"read_file(path="x</action")"#)));
    // Triple-quoted strings are for free text, not for paths.
    assert!(!matches(&g, &t(r#"read_file(path="""notes/april.md""")"#)));
    let (_, args) = call_of(&t(r#"read_file(path="x\u003c/action")"#)).expect("a call");
    assert_eq!(args["path"], "x</action");
    let (_, args) = call_of(&t(r#"read_file(path="back\\slash")"#)).expect("a call");
    assert_eq!(args["path"], "back\\slash");
}

#[test]
fn without_paths_path_parameters_are_free_strings() {
    let g = grammar(&tools(), &KnownPaths::default());
    let t = |call: &str| format!("<thought>x</thought>\n<action>{call}</action>");
    assert!(matches(&g, &t(r#"read_file(path="april.md")"#)));
    assert!(!g.has("path-file"));
    // Known folders only: file parameters stay free.
    let g = grammar(&tools(), &KnownPaths::new(vec![], vec![".".into()]));
    assert!(matches(&g, &t(r#"read_file(path="april.md")"#)));
    assert!(!matches(&g, &t(r#"list_dir(path="april")"#)));
}

#[test]
fn unannotated_parameters_stay_free() {
    let plain = vec![(
        "read_file",
        json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    )];
    let g = grammar(&plain, &odd());
    assert!(matches(
        &g,
        "<thought>x</thought>\n<action>read_file(path=\"april.md\")</action>"
    ));
}

#[test]
fn a_list_over_the_budget_falls_back_to_free_strings() {
    // 20,000 paths of 20 bytes: 400 KB of alternatives, over the schema budget.
    let files: Vec<String> = (0..20_000)
        .map(|i| format!("dir/file-{i:08}.txt"))
        .collect();
    let g = grammar(&tools(), &KnownPaths::new(files, vec![".".into()]));
    assert!(!g.has("path-file"));
    assert!(g.has("path-dir"));
    assert!(g.simplified().is_empty());
    let text = g.to_gbnf();
    assert!(text.len() < 64 * 1024, "{} bytes", text.len());
    assert!(parse_gbnf(&text).is_ok());
    assert!(matches(
        &g,
        "<thought>x</thought>\n<action>read_file(path=\"anything\")</action>"
    ));
}

#[test]
fn path_grammars_read_back_and_share_one_rule_per_kind() {
    let g = grammar(&tools(), &odd());
    let text = g.to_gbnf();
    let back = parse_gbnf(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back.to_gbnf(), text);
    assert_eq!(text.matches("path-any ::=").count(), 1);
    assert!(text.contains("\"\\\"x\\\\u003c/action\\\"\""), "{text}");
}
