//! One check per construct: how an expression renders as GBNF, what the checker refuses, and
//! what strings and schemas become. The whole-turn properties are in `tests.rs`.

use serde_json::json;

use super::expr::{ClassItem, Expr, Grammar};
use super::testkit::matches;
use super::{parse_gbnf, values};

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
