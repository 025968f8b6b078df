//! The grammar of a turn in a model's own tool-call format, for models whose chat template
//! declares tools in the Hermes / Qwen2.5 shape: each call a block
//! `<tool_call>\n{"name": "…", "arguments": {…}}\n</tool_call>` whose arguments follow the
//! tool's parameters, or, where an answer is allowed, free text that never opens such a block.
//!
//! The dialect reader reads every block this grammar accepts as a `hermes` call
//! (docs/protocol.md §1.8); the tests check it by reading a written call back.

use serde_json::Value;

use super::expr::{ClassItem, Expr, Grammar};
use super::shape::ToolShape;
use super::values::{Place, Values, chars, excluding};

/// What no string of a call, and no free answer, may contain (lowercase, any case): the tags
/// that would open or close a block, and tagloop's own decision tags, which the reader would
/// take for a decision of the protocol.
const NATIVE_FORBIDDEN: [&str; 6] = [
    "<tool_call",
    "</tool_call",
    "<final_answer",
    "</final_answer",
    "<action",
    "</action",
];

/// What one native turn may hold.
#[derive(Debug, Clone)]
pub struct NativeShape<'a> {
    /// The tools the model may call (none: only an answer).
    pub tools: Vec<ToolShape<'a>>,
    /// Most call blocks in the turn (1 without parallel calls; 0: no call at all).
    pub max_calls: usize,
    /// Whether the turn may answer in text instead of calling.
    pub answer: bool,
    /// The answer is JSON that follows this schema (`response_format`).
    pub output_schema: Option<&'a Value>,
}

/// The grammar of one native turn: `calls | answer`, as `shape` allows.
///
/// ```
/// use serde_json::json;
/// use tagloop_protocol::{NativeShape, ToolShape, native_grammar, parse_gbnf};
///
/// let params = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
/// let shape = NativeShape {
///     tools: vec![ToolShape { name: "get_weather", parameters: &params }],
///     max_calls: 1, answer: true, output_schema: None,
/// };
/// let gbnf = native_grammar(&shape).to_gbnf();
/// assert!(gbnf.contains(r#"{\"name\": \"get_weather\", \"arguments\": "#));
/// assert!(parse_gbnf(&gbnf).is_ok());
/// ```
pub fn native_grammar(shape: &NativeShape<'_>) -> Grammar {
    let mut g = Grammar::new();
    let forbidden: Vec<String> = NATIVE_FORBIDDEN.iter().map(|w| w.to_string()).collect();
    let mut values = Values::new(&mut g, forbidden.clone());
    for kept in ["root", "calls", "call", "answer"] {
        values.keep_name(kept);
    }
    let mut branches = Vec::new();
    if shape.max_calls > 0 && !shape.tools.is_empty() {
        let calls: Vec<Expr> = shape.tools.iter().map(|t| call(&mut values, t)).collect();
        let block = Expr::seq([
            Expr::lit("<tool_call>\n"),
            Expr::alt(calls),
            Expr::lit("\n</tool_call>"),
        ]);
        values.g.define("call", block);
        let more = Expr::seq([Expr::lit("\n"), Expr::rule("call")])
            .repeat(0, Some(shape.max_calls.saturating_sub(1) as u32));
        values
            .g
            .define("calls", Expr::seq([Expr::rule("call"), more]));
        branches.push(Expr::rule("calls"));
    }
    if shape.answer || branches.is_empty() {
        let body = match shape.output_schema {
            Some(schema) => values.within("the output schema", |v| {
                v.schema(schema, Place::Json, 0, "answer-json")
            }),
            // The answer may not open with `{` or a code fence: small models that mean a call
            // write its JSON bare or fenced (Qwen2.5-Coder 0.5B and 1.5B do), which no client
            // would take for one; held back there, they open the `<tool_call>` block instead.
            None => {
                let rest = excluding(values.g, "answer-text", &forbidden, &[], None, false);
                let first = chars(
                    true,
                    &[
                        ClassItem::Char(' '),
                        ClassItem::Char('\t'),
                        ClassItem::Char('\r'),
                        ClassItem::Char('\n'),
                        ClassItem::Char('<'),
                        ClassItem::Char('{'),
                        ClassItem::Char('`'),
                    ],
                );
                Expr::seq([first, Expr::rule(rest)])
            }
        };
        values.g.define("answer", body);
        branches.push(Expr::rule("answer"));
    }
    g.define("root", Expr::alt(branches));
    g
}

/// `{"name": "tool", "arguments": {…}}` with the arguments after the tool's parameters.
fn call(values: &mut Values<'_>, tool: &ToolShape<'_>) -> Expr {
    let rule = values.reserve(&format!("call-{}", tool.name));
    let label = format!("the parameters of tool `{}`", tool.name);
    let name = serde_json::to_string(tool.name).unwrap_or_default();
    values.within(&label, |v| {
        let args = v.schema(tool.parameters, Place::Json, 0, &format!("{rule}-args"));
        let e = Expr::seq([
            Expr::lit(format!("{{\"name\": {name}, \"arguments\": ")),
            args,
            Expr::lit("}"),
        ]);
        if !v.define_charged(&rule, e) {
            let any = v.simplify();
            v.g.define(
                rule.clone(),
                Expr::seq([
                    Expr::lit(format!("{{\"name\": {name}, \"arguments\": ")),
                    any,
                    Expr::lit("}"),
                ]),
            );
        }
    });
    Expr::rule(rule)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::grammar::parse_gbnf;
    use crate::{TurnKind, read_turn_with};

    fn shape<'a>(params: &'a Value, max_calls: usize, answer: bool) -> NativeShape<'a> {
        NativeShape {
            tools: vec![ToolShape {
                name: "get_weather",
                parameters: params,
            }],
            max_calls,
            answer,
            output_schema: None,
        }
    }

    fn params() -> Value {
        json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]})
    }

    #[test]
    fn calls_and_an_answer_are_the_two_branches() {
        let p = params();
        let gbnf = native_grammar(&shape(&p, 3, true)).to_gbnf();
        parse_gbnf(&gbnf).unwrap();
        assert!(gbnf.starts_with("root ::= calls | answer"), "{gbnf}");
        assert!(gbnf.contains("<tool_call>\\n"), "{gbnf}");
        assert!(gbnf.contains("{0,2}"), "{gbnf}");
        // A free answer cannot start as bare or fenced JSON.
        let answer = gbnf.lines().find(|l| l.starts_with("answer ::= ")).unwrap();
        assert!(answer.contains("{`"), "{answer}");
    }

    #[test]
    fn required_calls_have_no_answer_and_no_calls_only_an_answer() {
        let p = params();
        let calls = native_grammar(&shape(&p, 1, false)).to_gbnf();
        parse_gbnf(&calls).unwrap();
        assert!(calls.starts_with("root ::= calls\n"), "{calls}");
        let answer = native_grammar(&shape(&p, 0, false)).to_gbnf();
        parse_gbnf(&answer).unwrap();
        assert!(answer.starts_with("root ::= answer\n"), "{answer}");
    }

    #[test]
    fn a_block_of_the_grammar_reads_as_a_hermes_call() {
        let written = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
        let turn = read_turn_with(written, &["get_weather"]);
        assert_eq!(turn.kind, TurnKind::Action);
        assert_eq!(turn.action.as_deref(), Some("get_weather(city=\"Paris\")"));
    }
}
