//! Unit tests of the grammar's pieces (the behaviour: tests/protocol_*.rs and the corpus).

use super::lex::unescape;
use super::*;
use serde_json::json;

#[test]
fn escapes() {
    assert_eq!(unescape(r"a\nb\t\\\x"), "a\nb\t\\\\x");
    assert_eq!(unescape(r"\ud83d\ude00"), "😀");
    assert_eq!(unescape(r"\ud83d"), r"\ud83d");
    assert_eq!(unescape(r"\u4e2d"), "中");
    assert_eq!(unescape("\\"), "\\");
}

#[test]
fn basic() {
    let c = parse_action(r#"f(a=1, b="x", c=[1, {k: 'v'}], d=None,)"#).unwrap();
    assert_eq!(c.tool, "f");
    assert_eq!(c.args.len(), 4);
    assert_eq!(c.args[2].value, json!([1, {"k": "v"}]));
}

#[test]
fn a_quote_that_ends_the_action_closes_the_string_but_may_still_be_a_cut() {
    // The message names what is missing after the string…
    let e = parse_action(r#"search(query="x""#).unwrap_err();
    assert_eq!(e.message, "expected `,` or `)` after the value of `query`");
    // …and the runtime may still continue the turn: a stop string could have cut
    // `content="<a title="` inside the string just as well.
    assert!(e.open_string);
    let e = parse_action(r#"write_file(path="a", content="<a title=""#).unwrap_err();
    assert!(e.open_string, "{e}");
}

#[test]
fn an_unclosed_string_says_where_it_began() {
    let text = r#"area(radius=5, unit=")</thought> <final_answer>x"#;
    let e = parse_action(text).unwrap_err();
    assert!(e.open_string, "{e}");
    assert_eq!(e.string_start, Some(text.find('"').unwrap()));
    // After white space the offset is still the action text's.
    let spaced = format!("  {text}");
    let e = parse_action(&spaced).unwrap_err();
    assert_eq!(e.string_start, Some(spaced.find('"').unwrap()), "{e}");
    // Another error has none.
    assert_eq!(
        parse_action("area(radius=)").unwrap_err().string_start,
        None
    );
}
