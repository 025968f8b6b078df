//! Property tests for the protocol core (proptest).

use proptest::prelude::*;
use serde_json::{Map, Number, Value};
use tagloop::protocol::{
    Tag, TurnKind, neutralise, parse_action, parse_report, read_turn, render_observation, truncate,
};

/// Render a string the way a model would, in double quotes with escapes.
fn render_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn render_value(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => render_str(s),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(render_value).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(o) => format!(
            "{{{}}}",
            o.iter()
                .map(|(k, v)| format!("{}: {}", render_str(k), render_value(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| Value::Number(n.into())),
        (-1.0e6f64..1.0e6).prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        // Strings full of the characters that make quoting hard.
        "[a-z \"'\\\\,()=:<>\n{}\\[\\]é中]{0,24}".prop_map(Value::String),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-z_]{1,6}", inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn tool_name() -> impl Strategy<Value = String> {
    "[a-zA-Z_][a-zA-Z0-9_]{0,8}(\\.[a-z_]{1,5})?".prop_filter("not a keyword", |s| {
        !matches!(
            s.as_str(),
            "true" | "false" | "null" | "True" | "False" | "None"
        )
    })
}

fn arg_name() -> impl Strategy<Value = String> {
    "[a-z_][a-z0-9_]{0,8}".prop_filter("not a keyword", |s| {
        !matches!(s.as_str(), "true" | "false" | "null")
    })
}

/// What the reader trims from block contents: whitespace, a BOM and zero-width characters.
fn invisible(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '\u{feff}' | '\u{200b}' | '\u{200c}' | '\u{200d}' | '\u{2060}'
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// A generated call rendered to text parses back to the same tool and arguments.
    #[test]
    fn rendered_calls_round_trip(
        tool in tool_name(),
        positional in prop::collection::vec(value(), 0..3),
        named in prop::collection::vec((arg_name(), value()), 0..4),
        sep in prop_oneof![Just("="), Just(": "), Just(" = ")],
        trailing_comma in any::<bool>(),
    ) {
        let mut parts: Vec<String> = positional.iter().map(render_value).collect();
        parts.extend(named.iter().map(|(n, v)| format!("{n}{sep}{}", render_value(v))));
        let comma = if trailing_comma && !parts.is_empty() { "," } else { "" };
        let text = format!("{tool}({}{comma})", parts.join(", "));
        let call = parse_action(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(&call.tool, &tool);
        let want: Vec<(Option<String>, Value)> = positional.iter().map(|v| (None, v.clone()))
            .chain(named.iter().map(|(n, v)| (Some(n.clone()), v.clone()))).collect();
        let got: Vec<(Option<String>, Value)> = call.args.into_iter().map(|a| (a.name, a.value)).collect();
        prop_assert_eq!(got, want, "text: {}", text);
    }

    /// The same call inside a turn with a thought reads back too.
    #[test]
    fn calls_in_turns_round_trip(thought in "[a-zA-Z .,<>&]{0,60}", v in value()) {
        let turn = format!("<thought>{thought}</thought>\n<action>f(x={})</action>", render_value(&v));
        let r = parse_report(&turn, &[]);
        prop_assert_eq!(r.kind, "action", "turn: {}", turn);
        prop_assert_eq!(&r.action.as_ref().map(|a| a.args[0].value.clone()), &Some(v));
    }

    /// Arbitrary strings never panic, and every span points inside the text.
    #[test]
    fn arbitrary_strings_never_panic(s in "(<|>|/|think|thought|action|final_answer|observation|\"|'|\\\\|\\(|\\)|,|=|\\[|\\{|`|[a-zé ]){0,80}") {
        let turn = read_turn(&s);
        prop_assert!(turn.history_end <= s.len());
        for b in &turn.blocks {
            prop_assert!(b.span.end <= s.len() && b.body.end <= s.len());
        }
        let _ = parse_report(&s, &[]);
        if let Err(e) = parse_action(&s) { prop_assert!(e.offset <= s.len()); }
    }

    /// Arbitrary bytes (as lossy text) never panic.
    #[test]
    fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..200)) {
        let s = String::from_utf8_lossy(&b);
        let _ = parse_report(&s, &[]);
        let _ = parse_action(&s);
        let _ = render_observation(&s, 64);
    }

    /// Text wrapped in a protocol tag is kept byte for byte (apart from trimming).
    #[test]
    fn wrapped_text_keeps_every_byte(body in "[^<]{0,40}(<[a-z/]{0,6}[^<]{0,20}){0,3}") {
        // Text that itself holds one of our tags, or a prefix of a closing tag at its end, is not plain content.
        let lower = body.to_ascii_lowercase();
        prop_assume!(!["<think", "</think", "<final_answer", "</final_answer", "<observation", "<question", "<thought", "<action"]
            .iter().any(|t| lower.contains(t)));
        prop_assume!(!body.trim_end().ends_with('<') && !body.trim_end().ends_with("</"));
        let turn = read_turn(&format!("<final_answer>{body}</final_answer>"));
        prop_assert_eq!(turn.kind, TurnKind::Final);
        prop_assert_eq!(turn.final_text.as_deref(), Some(body.trim_matches(invisible)));
        let turn = read_turn(&format!("<thought>{body}</thought>"));
        let t = body.trim_matches(invisible);
        prop_assert_eq!(turn.thought.as_deref(), if t.is_empty() { None } else { Some(t) });
        prop_assert_eq!(turn.blocks.iter().filter(|b| b.tag == Tag::Thought).count(), 1);
    }

    /// A neutralised observation never holds a protocol tag, and nothing else changes.
    #[test]
    fn neutralised_output_has_no_tags(s in "(<|/|think|thought|action|final_answer|observation|question|THOUGHT|Action|[a-z <>&])*") {
        let n = neutralise(&s);
        let lower = n.to_ascii_lowercase();
        for t in ["think", "thought", "action", "observation", "final_answer", "question"] {
            let (open, close) = (format!("<{t}"), format!("</{t}"));
            prop_assert!(!lower.contains(&open) && !lower.contains(&close), "{}", n);
        }
        prop_assert_eq!(n.replace("&lt;", "<"), s.replace("&lt;", "<"));
        let turn = read_turn(&render_observation(&s, 1 << 20));
        prop_assert_eq!(turn.kind, TurnKind::None);
    }

    /// Truncation respects the limit and char boundaries, and reports how much was cut.
    #[test]
    fn truncation_is_bounded(s in "[a-zé中😀\n]{0,400}", limit in 48usize..300) {
        let t = truncate(&s, limit);
        prop_assert!(t.len() <= limit.max(s.len().min(limit)));
        if s.len() > limit { prop_assert!(t.contains("bytes cut")); } else { prop_assert_eq!(&*t, s.as_str()); }
    }
}
