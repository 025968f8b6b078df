use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::protocol::{Call, TurnKind, bind, parse_action_with, read_turn};

// ---- a sampler: random strings the grammar accepts -------------------------------------------

/// A small deterministic generator (xorshift), seeded by proptest.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// Characters tried for classes: the ones that matter to the protocol, many times over.
const POOL: &str = "<<<<///>>\"\"\"\\\\aAtThHiInNkKoOcCfF_ eé中\n\t0123{}[],:=()'xyz";

struct Sampler<'g> {
    g: &'g Grammar,
    rng: Rng,
    out: String,
    expansions: usize,
}

impl Sampler<'_> {
    /// Past this depth or budget, the shortest way out is taken.
    fn short(&self, depth: usize) -> bool {
        depth > 60 || self.expansions > 4000 || self.out.len() > 3000
    }

    fn walk(&mut self, e: &Expr, depth: usize) {
        match e {
            Expr::Lit(s) => self.out.push_str(s),
            Expr::Class { .. } => {
                let pool: Vec<char> = POOL.chars().filter(|&c| e.class_matches(c)).collect();
                let c = if pool.is_empty() {
                    // A positive class of characters outside the pool: its first one.
                    match e {
                        Expr::Class { items, .. } => match items.first() {
                            Some(ClassItem::Char(c)) | Some(ClassItem::Range(c, _)) => *c,
                            None => 'x',
                        },
                        _ => 'x',
                    }
                } else {
                    pool[self.rng.below(pool.len())]
                };
                self.out.push(c);
            }
            Expr::Ref(name) => {
                self.expansions += 1;
                let rule = self.g.get(name).cloned().unwrap_or(Expr::Seq(Vec::new()));
                self.walk(&rule, depth + 1);
            }
            Expr::Seq(items) => items.iter().for_each(|x| self.walk(x, depth)),
            Expr::Alt(items) => {
                let i = if self.short(depth) {
                    0
                } else {
                    self.rng.below(items.len())
                };
                self.walk(&items[i], depth);
            }
            Expr::Repeat { expr, min, max } => {
                let spread = max.map_or(4, |m| (m - min).min(4)) as usize;
                let n = if self.short(depth) {
                    *min as usize
                } else {
                    *min as usize + self.rng.below(spread + 1)
                };
                for _ in 0..n {
                    self.walk(expr, depth);
                }
            }
        }
    }
}

fn sample(g: &Grammar, seed: u64) -> String {
    let mut s = Sampler {
        g,
        rng: Rng(seed | 1),
        out: String::new(),
        expansions: 0,
    };
    let root = g.get("root").cloned().expect("root");
    s.walk(&root, 0);
    s.out
}

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

struct Case {
    tools: Vec<(&'static str, Value)>,
    schema: Option<Value>,
}

fn cases() -> Vec<Case> {
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
fn check_turn(text: &str, case: &Case) -> Result<(), String> {
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

fn shape(case: &Case, final_only: bool, opened: bool, think: bool) -> TurnShape<'_> {
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

// ---- one check per construct ------------------------------------------------------------------

#[test]
fn constructs_render_as_llama_cpp_writes_them() {
    let mut g = Grammar::new();
    g.define(
        "root",
        Expr::seq([
            Expr::lit("a\"b\\c\n"),
            Expr::class(
                true,
                [
                    ClassItem::Char(']'),
                    ClassItem::Char('-'),
                    ClassItem::Char('^'),
                    ClassItem::Range('a', 'z'),
                ],
            ),
            Expr::rule("x").opt(),
            Expr::rule("x").repeat(0, None),
            Expr::rule("x").repeat(1, None),
            Expr::rule("x").repeat(2, Some(5)),
            Expr::rule("x").repeat(3, Some(3)),
            Expr::rule("x").repeat(2, None),
            Expr::alt([Expr::lit("p"), Expr::seq([Expr::lit("q"), Expr::lit("r")])]),
            Expr::seq([Expr::lit("s"), Expr::rule("x")]).opt(),
        ]),
    );
    g.define("x", Expr::lit("x"));
    let text = g.to_gbnf();
    assert_eq!(
        text,
        "root ::= \"a\\\"b\\\\c\\n\" [^\\]\\x2D\\x5Ea-z] x? x* x+ x{2,5} x{3} x{2,} (\"p\" | \"q\" \"r\") (\"s\" x)?\nx ::= \"x\"\n"
    );
    assert_eq!(parse_gbnf(&text).map(|g2| g2.to_gbnf()), Ok(text));
}

#[test]
fn the_checker_refuses_what_llama_cpp_would_misread() {
    let bad = [
        ("x ::= \"a\"\n", "no `root`"),
        ("root ::= y\n", "undefined rule `y`"),
        ("root ::= root \"a\"\n", "left-recursive"),
        ("root ::= a\na ::= \"\"? root\n", "left-recursive"),
        ("root ::= \"abc\n", "newline inside a literal"),
        ("root ::= [ab\n", "unterminated"),
        ("root ::= [z-a]\n", "inverted range"),
        ("root ::= \"\\q\"\n", "unknown escape"),
        ("root ::= \"\\-\"\n", "unknown escape"),
        ("root ::= x{3,2}\nx ::= \"x\"\n", "maximum is below"),
        ("root ::= (\"a\"\n", "expected `)`"),
        ("root = \"a\"\n", "expected `::=`"),
        ("root ::= \"\\x4\"\n", "hex digits"),
        ("root ::= ([ ]{0,3} [a]){1,800}\n", "over llama.cpp's limit"),
        ("root ::= [a]{2001}\n", "more than 2000 repetitions"),
    ];
    for (text, why) in bad {
        let err = parse_gbnf(text).expect_err(text).to_string();
        assert!(err.contains(why), "{text:?}: {err}");
    }
    // Right recursion, comments, multi-line groups and `.` are fine.
    let good = "# c\nroot ::= (\n  \"a\" root\n  | \"\"\n) . [\\[\\]] x{1,2000} ([a] [b]){1,1000}  # tail\nx ::= ([ ]{0,3} [a])\n";
    assert!(parse_gbnf(good).is_ok());
}

#[test]
fn strings_never_spell_a_tag_in_any_case() {
    let mut g = Grammar::new();
    let forbidden = vec!["</action".to_string(), "<think".to_string()];
    let start = values::excluding(&mut g, "s", &forbidden, &[ClassItem::Char('"')], None, true);
    g.define("root", Expr::rule(start));
    // Exhaustive over short strings of the letters that matter.
    let letters = [
        '<', '/', 'a', 'A', 'c', 't', 'T', 'h', 'i', 'n', 'k', 'o', 'x', '"',
    ];
    let accepts = |s: &str| matches(&g, s);
    for s in [
        "",
        "abc",
        "<acti",
        "</actio",
        "x<thin",
        "</ACTIONS",
        "<<think",
    ] {
        let forbidden_in =
            s.to_lowercase().contains("</action") || s.to_lowercase().contains("<think");
        assert_eq!(accepts(s), !forbidden_in, "{s:?}");
    }
    let mut stack = vec![String::new()];
    while let Some(s) = stack.pop() {
        let lower = s.to_lowercase();
        let ok = !lower.contains("</action") && !lower.contains("<think") && !s.contains('"');
        assert_eq!(accepts(&s), ok, "{s:?}");
        if s.chars().count() < 5 {
            for c in letters {
                stack.push(format!("{s}{c}"));
            }
        }
    }
}

/// Whether the grammar matches the whole string (a plain backtracking matcher, for tests).
pub(super) fn matches(g: &Grammar, s: &str) -> bool {
    fn go<'a>(g: &'a Grammar, e: &'a Expr, s: &'a str, k: &mut dyn FnMut(&'a str) -> bool) -> bool {
        match e {
            Expr::Lit(l) => s.strip_prefix(l.as_str()).is_some_and(&mut *k),
            Expr::Class { .. } => {
                let mut it = s.chars();
                match it.next() {
                    Some(c) if e.class_matches(c) => k(it.as_str()),
                    _ => false,
                }
            }
            Expr::Ref(n) => g.get(n).is_some_and(|r| go(g, r, s, k)),
            Expr::Seq(items) => seq(g, items, s, k),
            Expr::Alt(items) => items.iter().any(|x| go(g, x, s, k)),
            Expr::Repeat { expr, min, max } => rep(g, expr, *min, *max, s, k),
        }
    }
    fn seq<'a>(
        g: &'a Grammar,
        items: &'a [Expr],
        s: &'a str,
        k: &mut dyn FnMut(&'a str) -> bool,
    ) -> bool {
        match items.split_first() {
            None => k(s),
            Some((first, rest)) => go(g, first, s, &mut |r| seq(g, rest, r, k)),
        }
    }
    fn rep<'a>(
        g: &'a Grammar,
        e: &'a Expr,
        min: u32,
        max: Option<u32>,
        s: &'a str,
        k: &mut dyn FnMut(&'a str) -> bool,
    ) -> bool {
        if min == 0 && k(s) {
            return true;
        }
        if max == Some(0) {
            return false;
        }
        go(g, e, s, &mut |r| {
            r.len() < s.len() && rep(g, e, min.saturating_sub(1), max.map(|m| m - 1), r, k)
        })
    }
    let root = g.get("root").expect("root");
    go(g, root, s, &mut |r| r.is_empty())
}

#[test]
fn schema_keywords_become_grammar() {
    let schema = json!({"type": "object", "properties": {
        "n": {"type": "integer"}, "k": {"enum": ["a", 1]}, "c": {"const": true},
        "l": {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 2}},
        "required": ["n", "k", "c", "l"]});
    let mut g = Grammar::new();
    let mut v = values::Values::new(&mut g, vec![]);
    let e = v.schema(&schema, values::Place::Json, 0, "answer");
    g.define("root", e);
    assert!(matches(
        &g,
        r#"{"n": -12, "k": "a", "c": true, "l": [true, false]}"#
    ));
    assert!(matches(&g, r#"{"n":0,"k":1,"c":true,"l":[false]}"#));
    assert!(
        !matches(&g, r#"{"n": 1.5, "k": "a", "c": true, "l": [true]}"#),
        "integer"
    );
    assert!(
        !matches(&g, r#"{"n": 1, "k": "b", "c": true, "l": [true]}"#),
        "enum"
    );
    assert!(
        !matches(&g, r#"{"n": 1, "k": 1, "c": false, "l": [true]}"#),
        "const"
    );
    assert!(
        !matches(&g, r#"{"n": 1, "k": 1, "c": true, "l": []}"#),
        "minItems"
    );
    assert!(
        !matches(&g, r#"{"n": 1, "k": 1, "c": true, "l": [true,true,true]}"#),
        "maxItems"
    );
    assert!(
        !matches(&g, r#"{"k": 1, "n": 1, "c": true, "l": [true]}"#),
        "declared order"
    );
    assert!(
        !matches(&g, r#"{"n": 01, "k": 1, "c": true, "l": [true]}"#),
        "leading zero"
    );
}

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
                let call = crate::protocol::parse_action(turn.action.as_deref().unwrap_or(""));
                let value = call
                    .ok()
                    .and_then(|c| c.args.first().map(|a| a.value.clone()));
                assert_eq!(value, Some(json!(inner)), "{action}");
                let stops = crate::protocol::STOP_SEQUENCES;
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
