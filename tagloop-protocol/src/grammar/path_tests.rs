//! Path-valued parameters: limited to the known paths (escaped as the reader reads them back),
//! one bounded line without paths, when the list does not fit the budget or for a path to
//! create, and every grammar still read back by the GBNF checker.

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
fn without_paths_path_parameters_are_one_bounded_line() {
    let g = grammar(&tools(), &KnownPaths::default());
    let t = |call: &str| format!("<thought>x</thought>\n<action>{call}</action>");
    assert!(matches(&g, &t(r#"read_file(path="april.md")"#)));
    assert!(!g.has("path-file"));
    assert!(g.has("path-string"));
    assert!(matches(&g, &t(r#"read_file(path="""april.md""")"#)));
    assert!(!matches(&g, &t(r#"read_file(path="a\nb")"#)));
    assert!(!matches(&g, &t("read_file(path=\"\"\"a\nb\"\"\")")));
    // Known folders only: file parameters are any one line.
    let g = grammar(&tools(), &KnownPaths::new(vec![], vec![".".into()]));
    assert!(matches(&g, &t(r#"read_file(path="april.md")"#)));
    assert!(!matches(&g, &t(r#"list_dir(path="april")"#)));
}

/// `write_file(path, content)` as the toolkit declares it: a path the call creates (`new`),
/// and free text.
fn write_file() -> Vec<(&'static str, Value)> {
    vec![(
        "write_file",
        json!({"type": "object", "properties": {
            "path": {"type": "string", PATH_ANNOTATION: "new"},
            "content": {"type": "string"}}, "required": ["path", "content"]}),
    )]
}

/// What SmolLM2 wrote into `write_file`'s path under the grammar that left it a free string: a
/// path opened as a triple-quoted string or with a newline, then filled with the runtime's own
/// notice until the degeneration guard cut the turn (issue 31 item 5; 12 such turns, 3,232
/// tokens, on the lab's suite). The triple-quoted form stays allowed with the same one-line body
/// (`"""` is SmolLM2's likeliest token after `path=`; refused it, the model counted into the
/// path: `path=", 1, 2, 3, …`).
#[test]
fn a_path_to_create_is_one_line() {
    let t = |args: &str| format!("<action>write_file({args})</action>");
    let notice = "Your turn was cut off because it kept repeating the same text over and over; \
                  nothing in it was run. Do not repeat yourself: write one short thought, then \
                  one action or your final answer.";
    for known in [KnownPaths::default(), odd()] {
        let g = grammar(&write_file(), &known);
        assert!(!g.has("path-file"), "a path to create is never limited");
        for ok in [
            r#"path="codename.txt", content="Zephyr""#,
            r#"path="notes/new folder/日本.md", content="""two
lines""""#,
            r#"path="""notes.txt""", content="Zephyr""#,
        ] {
            assert!(matches(&g, &t(ok)), "{ok}");
        }
        let longest = format!("notes/{}.txt", "a".repeat(500));
        for quote in ["\"", "\"\"\""] {
            let call = format!(r#"path={quote}{longest}{quote}, content="x""#);
            assert!(matches(&g, &t(&call)), "{call}");
        }
        let runaways = [
            r#"path="""\nnotes.txt""", content="x""#.to_owned(),
            "path=\"\"\"notes\n.txt\"\"\", content=\"x\"".to_owned(),
            r#"path="""notes.txt", content="x""#.to_owned(),
            r#"path="notes.txt""", content="x""#.to_owned(),
            r#"path="""say "hi".txt""", content="x""#.to_owned(),
            r#"path="\nnotes.txt", content="x""#.to_owned(),
            "path=\"notes\n.txt\", content=\"x\"".to_owned(),
            r#"path="", content="x""#.to_owned(),
            r#"path="a<b.txt", content="x""#.to_owned(),
            format!("path=\"{notice}\n{notice}\", content=\"x\""),
            format!("path=\"\"\"{notice}\n{notice}\"\"\", content=\"x\""),
        ];
        for bad in &runaways {
            assert!(!matches(&g, &t(bad)), "{bad}");
        }
    }
    let text = grammar(&write_file(), &KnownPaths::default()).to_gbnf();
    let rule = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name} ::= ")))
            .unwrap_or("")
    };
    assert_eq!(
        rule("path-body"),
        r#"path-body ::= [^"\\<\x00-\x1F\x7F]+"#,
        "{text}"
    );
    assert_eq!(
        rule("path-string"),
        r#"path-string ::= "\"" path-body "\"""#
    );
    assert_eq!(
        rule("path-triple"),
        r#"path-triple ::= "\"\"\"" path-body "\"\"\"""#
    );
    assert!(
        text.contains(r#""write_file(" "path=" (path-string | path-triple)"#),
        "{text}"
    );
    assert!(parse_gbnf(&text).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every path a sampled `write_file` turn creates is one line of 1 to 256 characters that
    /// reads back as written.
    #[test]
    fn sampled_paths_to_create_are_one_short_line(seed in any::<u64>()) {
        let g = grammar(&write_file(), &KnownPaths::default());
        let text = sample(&g, seed);
        let turn = read_turn(&text);
        if turn.kind == TurnKind::Action {
            let call = parse_action_with(turn.action.as_deref().unwrap_or(""), &|_| true)
                .unwrap_or_else(|e| panic!("{e:?}: {text:?}"));
            let args = bind(&call.args, &write_file()[0].1).unwrap_or_else(|e| panic!("{e}: {text:?}"));
            let path = args["path"].as_str().unwrap_or("not a string");
            prop_assert!(!path.is_empty(), "{text:?}");
            prop_assert!(!path.contains(['\n', '\r', '"', '\\', '<']), "{text:?}");
        }
    }
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
fn a_list_over_the_budget_falls_back_to_one_bounded_line() {
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
    assert!(!matches(
        &g,
        "<thought>x</thought>\n<action>read_file(path=\"\"\"any\nthing\"\"\")</action>"
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
