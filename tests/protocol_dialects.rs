//! Other tool-call dialects (docs/protocol.md §1.8): any call written in one of them reads back
//! as the same tool and arguments, through the reader, the rendering in tagloop's syntax and the
//! action parser. XML dialects give strings; the JSON ones keep the values' types.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use tagloop::protocol::{Dialect, TurnKind, parse_action, read_turn_with};

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn args_strategy() -> impl Strategy<Value = Vec<(String, String)>> {
    // Names that are identifiers; values with quotes, backslashes, newlines, `&`, `<` and
    // non-ASCII text, but no protocol tag and no leading or trailing newline (layout in Qwen3).
    let name = "[a-z][a-z0-9_]{0,8}";
    let value = "[a-zA-Z0-9 é\"'\\\\&<>{}\\[\\],:=()]{0,12}(\n[a-z &]{1,6}){0,2}";
    proptest::collection::vec((name, value), 0..4).prop_map(|v| {
        let mut seen = std::collections::HashSet::new();
        v.into_iter()
            .filter(|(n, _)| seen.insert(n.clone()))
            .filter(|(_, v)| !v.to_lowercase().contains("<think") && !v.contains("</"))
            .collect()
    })
}

fn as_map(args: &[(String, String)]) -> Map<String, Value> {
    args.iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect()
}

fn written(dialect: Dialect, tool: &str, args: &[(String, String)]) -> String {
    let json_args = Value::Object(as_map(args)).to_string();
    match dialect {
        Dialect::Hermes => format!(
            "<tool_call>\n{{\"name\": \"{tool}\", \"arguments\": {json_args}}}\n</tool_call>"
        ),
        Dialect::Qwen3Coder => {
            let mut s = format!("<tool_call>\n<function={tool}>\n");
            for (k, v) in args {
                s.push_str(&format!("<parameter={k}>\n{v}\n</parameter>\n"));
            }
            s + "</function>\n</tool_call>"
        }
        Dialect::FunctionCalls => {
            let mut s = format!("<function_calls>\n<invoke name=\"{tool}\">\n");
            for (k, v) in args {
                s.push_str(&format!(
                    "<parameter name=\"{k}\">{}</parameter>\n",
                    xml_escape(v)
                ));
            }
            s + "</invoke>\n</function_calls>"
        }
        Dialect::JsonInAction => {
            format!("<action>{{\"tool\": \"{tool}\", \"args\": {json_args}}}</action>")
        }
        Dialect::XmlTool => {
            let mut s = format!("<{tool}>");
            for (k, v) in args {
                s.push_str(&format!("<{k}>{}</{k}>", xml_escape(v)));
            }
            s + &format!("</{tool}>")
        }
    }
}

const DIALECTS: [Dialect; 5] = [
    Dialect::Hermes,
    Dialect::Qwen3Coder,
    Dialect::FunctionCalls,
    Dialect::JsonInAction,
    Dialect::XmlTool,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn every_dialect_reads_back_as_the_same_call(
        which in 0usize..5,
        tool in "[a-z][a-z_]{0,10}",
        args in args_strategy(),
        lead in "[A-Za-z .]{0,20}",
        invented in any::<bool>(),
    ) {
        let dialect = DIALECTS[which];
        let mut text = format!("<thought>{lead}</thought>\n{}", written(dialect, &tool, &args));
        if invented {
            text.push_str("\n<tool_response>{\"ok\": true}</tool_response>\n<observation>made up");
        }
        let turn = read_turn_with(&text, &[tool.as_str()]);
        prop_assert_eq!(turn.kind, TurnKind::Action, "{}", text);
        prop_assert_eq!(turn.dialect, Some(dialect), "{}", text);
        prop_assert!(turn.dialect_error.is_none(), "{:?}\n{}", turn.dialect_error, text);
        let call = parse_action(turn.action.as_deref().unwrap_or("")).expect("renders in our syntax");
        prop_assert_eq!(&call.tool, &tool);
        let got: Map<String, Value> = call.args.into_iter().map(|a| (a.name.unwrap_or_default(), a.value)).collect();
        prop_assert_eq!(got, as_map(&args), "{}", text);
        if invented {
            prop_assert!(turn.discarded.as_deref().is_some_and(|d| d.contains("made up")), "{:?}", turn.discarded);
        }
    }

    /// A dialect tag mentioned inside a thought or a final answer calls nothing.
    #[test]
    fn mentioning_a_dialect_calls_nothing(which in 0usize..5, tool in "[a-z]{1,8}") {
        let call = written(DIALECTS[which], &tool, &[("p".into(), "v".into())]);
        let text = format!("<thought>I could write {call} here.</thought>\n<final_answer>no call: {call}</final_answer>");
        let turn = read_turn_with(&text, &[tool.as_str()]);
        prop_assert_eq!(turn.kind, TurnKind::Final);
        prop_assert_eq!(turn.dialect, None);
    }
}

#[test]
fn json_dialects_keep_types_and_xml_ones_give_strings() {
    let t = read_turn_with(
        r#"<tool_call>{"name": "f", "arguments": {"n": 3, "b": true, "l": [1, 2], "o": {"k": "v"}}}</tool_call>"#,
        &[],
    );
    let call = parse_action(t.action.as_deref().unwrap()).unwrap();
    let got: Map<String, Value> = call
        .args
        .into_iter()
        .map(|a| (a.name.unwrap(), a.value))
        .collect();
    assert_eq!(
        Value::Object(got),
        json!({"n": 3, "b": true, "l": [1, 2], "o": {"k": "v"}})
    );
    let t = read_turn_with("<f><n>3</n><l>1</l><l>2</l></f>", &["f"]);
    let call = parse_action(t.action.as_deref().unwrap()).unwrap();
    let got: Map<String, Value> = call
        .args
        .into_iter()
        .map(|a| (a.name.unwrap(), a.value))
        .collect();
    assert_eq!(Value::Object(got), json!({"n": "3", "l": ["1", "2"]}));
}

#[test]
fn our_own_syntax_always_wins_and_never_changes() {
    let text = "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><action>b(x=1)</action>";
    let t = read_turn_with(text, &["a", "b"]);
    assert_eq!(t.dialect, None);
    assert_eq!(t.action.as_deref(), Some("b(x=1)"));
    // Our syntax inside <tool_call> is not a dialect (the shared corpus's ds-01).
    let t = read_turn_with(
        "<thought>x</thought>\n<tool_call>search(query=\"x\")</tool_call>",
        &[],
    );
    assert_eq!(t.kind, TurnKind::None);
}

/// The arguments of the call a turn's action renders to, by name.
fn call_args(text: &str, tools: &[&str]) -> (String, Map<String, Value>) {
    let t = read_turn_with(text, tools);
    let call = parse_action(t.action.as_deref().unwrap_or("")).expect("renders in our syntax");
    let args = call
        .args
        .into_iter()
        .map(|a| (a.name.unwrap_or_default(), a.value))
        .collect();
    (call.tool, args)
}

/// Issue 21, item 11: `<invoke name=…>` inside tagloop's own `<action>` is the invoke dialect
/// (as it is inside `<function_calls>`), not a call of a tool named `invoke`.
#[test]
fn invoke_inside_an_action_is_the_invoke_dialect() {
    let text = "<thought>Search.</thought>\n<action><invoke name=\"search\"><parameter name=\"query\">x</parameter></invoke></action>";
    let t = read_turn_with(text, &["search"]);
    assert_eq!(t.kind, TurnKind::Action);
    assert_eq!(t.dialect, Some(Dialect::FunctionCalls));
    assert_eq!(t.dialect_error, None);
    assert_eq!(t.action.as_deref(), Some("search(query=\"x\")"));

    // Several parameters, laid out on lines, valued as the invoke dialect values them
    // (strings, entities decoded, CDATA unwrapped); a repeated one becomes a list.
    let text = "<action>\n<invoke name=\"write_file\">\n<parameter name=\"path\">a &amp; b.txt</parameter>\n<parameter name=\"content\"><![CDATA[<p>hi</p>]]></parameter>\n<parameter name=\"tag\">1</parameter>\n<parameter name=\"tag\">2</parameter>\n</invoke>\n</action>";
    let (tool, args) = call_args(text, &[]);
    assert_eq!(tool, "write_file");
    assert_eq!(
        Value::Object(args),
        json!({"path": "a & b.txt", "content": "<p>hi</p>", "tag": ["1", "2"]})
    );

    // Without the name attribute it is an error the model is told about, not a tool `invoke`.
    let t = read_turn_with(
        "<action><invoke tool=\"search\"><parameter name=\"query\">x</parameter></invoke></action>",
        &[],
    );
    assert_eq!(t.dialect, Some(Dialect::FunctionCalls));
    assert!(t.dialect_error.is_some(), "{t:?}");

    // A tool really named `invoke`, written in the XML-tool dialect (no attributes), stays so.
    let (tool, args) = call_args(
        "<action><invoke><parameter>x</parameter></invoke></action>",
        &["invoke"],
    );
    assert_eq!(tool, "invoke");
    assert_eq!(Value::Object(args), json!({"parameter": "x"}));
}
