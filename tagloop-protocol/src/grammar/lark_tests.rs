//! The Lark form against llguidance itself (the `llguidance` crate, the library llama.cpp links
//! when built with `-DLLAMA_LLGUIDANCE=ON`): every grammar our tests build compiles, and every
//! turn sampled from the grammar tree (which the reader reads and binds, `tests.rs`) is
//! accepted, byte by byte, by llguidance's matcher with a one-byte-per-token tokenizer.

use std::sync::{Arc, OnceLock};

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, TokEnv};
use llguidance::{Matcher, ParserFactory};
use proptest::prelude::*;
use serde_json::json;

use super::testkit::{matches, sample};
use super::tests::{
    Case, MARKUP_AFTER_AN_ANSWER, ORDINARY_ANSWERS, cases, check_turn, final_turn, shape,
};
use super::*;

fn env() -> &'static (TokEnv, Arc<ParserFactory>) {
    static ENV: OnceLock<(TokEnv, Arc<ParserFactory>)> = OnceLock::new();
    ENV.get_or_init(|| {
        let tok_env = ApproximateTokEnv::single_byte_env();
        let mut factory = ParserFactory::new_simple(&tok_env).expect("factory");
        factory.quiet();
        (tok_env, Arc::new(factory))
    })
}

/// A matcher for the grammar's Lark text; panics with llguidance's error if it does not compile.
fn matcher(g: &Grammar) -> Matcher {
    let (_, factory) = env();
    let lark = g.to_lark();
    let parser = factory
        .create_parser(TopLevelGrammar::from_lark(lark.clone()))
        .unwrap_or_else(|e| panic!("llguidance refuses the grammar: {e}\n{lark}"));
    Matcher::new(Ok(parser))
}

/// Whether llguidance accepts `text` as a whole turn: every byte allowed, and the grammar
/// complete at the end.
pub(super) fn accepts(g: &Grammar, text: &str) -> Result<(), String> {
    let (tok_env, _) = env();
    let mut m = matcher(g);
    let tokens = tok_env.tokenize_bytes(text.as_bytes());
    for (i, t) in tokens.iter().enumerate() {
        if let Err(e) = m.consume_token(*t) {
            return Err(format!("refused at byte {i}: {e}"));
        }
    }
    match m.is_accepting() {
        Ok(true) => Ok(()),
        Ok(false) => Err("not complete at the end".into()),
        Err(e) => Err(format!("{e}")),
    }
}

/// Every turn shape of a case: step or last turn, opened thought or not, reasoning or not.
fn variants(case: &Case) -> Vec<Grammar> {
    let mut out = Vec::new();
    for final_only in [false, true] {
        for opened in [false, true] {
            for think in [false, true] {
                out.push(turn_grammar(&shape(case, final_only, opened, think)));
            }
        }
    }
    out.push(decision_grammar(&shape(case, false, false, false)));
    out
}

#[test]
fn every_test_grammar_compiles_in_llguidance() {
    for case in cases() {
        for g in variants(&case) {
            let lark = g.to_lark();
            assert!(lark.starts_with("%llguidance {}\n"), "{lark}");
            matcher(&g);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// What our grammar produces, and our reader reads and binds, llguidance accepts.
    #[test]
    fn llguidance_accepts_every_sampled_turn(which in 0usize..4, seed in any::<u64>(), final_only in any::<bool>()) {
        let cases = cases();
        let case = &cases[which];
        let g = turn_grammar(&shape(case, final_only, false, false));
        let text = sample(&g, seed);
        prop_assert!(check_turn(&text, case).is_ok());
        if let Err(e) = accepts(&g, &text) {
            prop_assert!(false, "{e}\nturn: {text:?}\n{}", g.to_lark());
        }
    }
}

#[test]
fn llguidance_agrees_on_turns_models_write() {
    let case = &cases()[0];
    let g = turn_grammar(&shape(case, false, false, false));
    let t = |call: &str| format!("<thought>I read it.</thought>\n<action>{call}</action>");
    let good = [
        t(r#"read_file(path="notes/april.md")"#),
        t(r#"read_file(path="a", start_line=3, end_line=4)"#),
        t("read_file(path=\"\"\"a \"b\" c\"\"\")"),
        "<thought>done</thought><final_answer>It is 42.</final_answer>".to_owned(),
        "<thought>done,  ok\n</thought>\n\n<final_answer>x < y, <b>bold</b></final_answer>"
            .to_owned(),
        "<action>read_file(path=\"a\")".to_owned(),
    ];
    for text in &good {
        assert!(matches(&g, text), "ours refuses {text:?}");
        if let Err(e) = accepts(&g, text) {
            panic!("{e}\n{text:?}\n{}", g.to_lark());
        }
    }
    let bad = [
        t(r#"read_file(start_line=3, path="a")"#),
        t(r#"read_file(path="a</action>")"#),
        t(r#"write_file(path="a")"#),
        "<thought>a <b></thought><final_answer>x</final_answer>".to_owned(),
    ];
    for text in &bad {
        assert!(!matches(&g, text), "ours accepts {text:?}");
        assert!(accepts(&g, text).is_err(), "llguidance accepts {text:?}");
    }
}

/// llguidance, like our matcher, refuses a free answer that spells the prompt's markup and
/// takes one with other tags.
#[test]
fn llguidance_refuses_the_prompts_markup_in_an_answer() {
    let g = turn_grammar(&shape(&cases()[0], false, false, false));
    for word in MARKUP_AFTER_AN_ANSWER {
        assert!(accepts(&g, &final_turn(word)).is_err(), "{word}");
    }
    for inner in ORDINARY_ANSWERS {
        if let Err(e) = accepts(&g, &final_turn(inner)) {
            panic!("{e}: {inner}\n{}", g.to_lark());
        }
    }
}

#[test]
fn path_lists_compile_and_accept_odd_names() {
    let params = json!({"type": "object", "properties": {
        "path": {"type": "string", PATH_ANNOTATION: "file"}}, "required": ["path"]});
    let shape = TurnShape {
        tools: vec![ToolShape {
            name: "read_file",
            parameters: &params,
        }],
        output_schema: None,
        final_only: false,
        opened_thought: false,
        think: false,
        ..TurnShape::default()
    };
    let known = KnownPaths::new(
        vec![
            "say \"hi\".txt".into(),
            "back\\slash".into(),
            "日本/über.md".into(),
            "x</action".into(),
            "a/b-c^d]e[f.txt".into(),
        ],
        vec![".".into()],
    );
    let g = turn_grammar_with(&shape, &known);
    let t = |p: &str| format!("<thought>x</thought>\n<action>read_file(path={p})</action>");
    for p in [
        r#""say \"hi\".txt""#,
        r#""back\\slash""#,
        r#""日本/über.md""#,
        r#""x\u003c/action""#,
        r#""a/b-c^d]e[f.txt""#,
    ] {
        accepts(&g, &t(p)).unwrap_or_else(|e| panic!("{e}: {p}\n{}", g.to_lark()));
    }
    assert!(accepts(&g, &t(r#""april.md""#)).is_err());
}

/// llguidance, like our matcher, takes a created file's path as one line of at most 256
/// characters, in double or triple quotes, and refuses the runaways SmolLM2 wrote into it (a
/// newline, prose past the bound).
#[test]
fn llguidance_keeps_a_path_to_create_on_one_line() {
    let params = json!({"type": "object", "properties": {
        "path": {"type": "string", PATH_ANNOTATION: "new"},
        "content": {"type": "string"}}, "required": ["path", "content"]});
    let shape = TurnShape::new(vec![ToolShape {
        name: "write_file",
        parameters: &params,
    }]);
    let g = turn_grammar(&shape);
    let t = |path: &str| format!("<action>write_file(path={path}, content=\"Zephyr\")</action>");
    let longest = format!("\"notes/{}.txt\"", "a".repeat(500));
    for ok in [
        r#""codename.txt""#,
        r#""""codename.txt""""#,
        r#""a b/日本.md""#,
        longest.as_str(),
    ] {
        accepts(&g, &t(ok)).unwrap_or_else(|e| panic!("{e}: {ok}\n{}", g.to_lark()));
    }
    for bad in [
        r#""""\nnotes.txt""""#.to_owned(),
        r#""""notes.txt""#.to_owned(),
        r#""\nnotes.txt""#.to_owned(),
        r#""notes.txt""#.replace(".txt", "\".txt"),
        r#""a<b.txt""#.to_owned(),
    ] {
        assert!(accepts(&g, &t(&bad)).is_err(), "{bad}");
    }
}
