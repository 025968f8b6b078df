//! The grammar of one turn, from what the loop knows: the tools and the role's schema.

use serde_json::Value;

use super::expr::{ClassItem, Expr, Grammar};
use super::members::Members;
use super::paths::KnownPaths;
use super::schema::required;
use super::shape::{ThoughtShape, ToolShape, TurnShape};
use super::values::{Place, Values, chars, excluding};
use crate::action::parse_action;

/// The words that open a lazy grammar on servers that support one (llama.cpp's
/// `grammar_triggers`): free text until the model writes one of them, constrained after it.
pub const LAZY_TRIGGERS: [&str; 2] = ["<action>", "<final_answer>"];

/// What no string or free-text answer may contain (matched without regard to case): the stop
/// strings (tagloop's own and the dialects'), which would end the turn on the server, the closing tag of an action, which the
/// reader would take as the end of the block, and `<think>` tags, which the reader takes out as
/// reasoning wherever they are. Every other tag inside a string or an answer is content
/// (the tests check each one).
const FORBIDDEN: [&str; 7] = [
    "</action",
    "<observation",
    "</final_answer",
    "</tool_call",
    "</function_calls",
    "<think",
    "</think",
];

/// What a free-text final answer may not contain beyond [`FORBIDDEN`] (matched without regard
/// to case): the tags of the next step a model invents when it does not stop, and the rest of
/// the prompt's own markup — the end of an observation, a question's tags, the completions
/// prompt's task separator (`=== Task 2 ===`) — which a model that does not stop copies back
/// from the prompt (gemma-3-270m, after its answer, wrote on into `</observation>`,
/// `<question>` and the worked examples until the repetition guard cut it). Free, the stop
/// strings end such a turn; under the grammar the answer has to end at `</final_answer>`
/// instead. (`<observation` is in [`FORBIDDEN`] already.)
const ANSWER_FORBIDDEN: [&str; 7] = [
    "<action",
    "<thought",
    "</thought",
    "</observation",
    "<question",
    "</question",
    "=== task",
];

/// Tools whose name the action grammar cannot read are left out of the grammar (the model can
/// still be told about them; it just cannot be constrained to call them).
pub(crate) fn callable(name: &str) -> bool {
    !name.is_empty()
        && parse_action(&format!("{name}()"))
            .map(|c| c.tool == name)
            .unwrap_or(false)
}

/// The grammar of a whole turn: an optional `<think>` block, the thought, then the action or the
/// final answer.
///
/// The thought is shaped after how models leave it, so that the decision they were about to
/// write is always allowed (docs/protocol.md §1.7):
///
/// * its closing tag is optional (on a line of its own or not), and up to three blanks may
///   follow it or the last word (a newline, a blank line), then the `<action>` or
///   `<final_answer>` tag;
/// * it is one line (its words separated by at most two spaces or tabs): a newline ends it, so a
///   model that wants to stop after its sentence (end-of-sequence is masked until the grammar
///   is complete, and the likeliest token after it is a newline) is at a decision at once
///   instead of being held in the thought, where small models write the same line again and
///   again until the budget is spent. A model that reasons at length does it in `<think>`;
/// * no counted repetition bounds its length (llama.cpp writes `x{1,400}` out as 400 rules and
///   checks them at every token): the turn's token budget and the degeneration guard bound it.
///
/// That is the model's own thought ([`ThoughtShape::Free`]); a shape may have it begin with
/// the runtime's words ([`ThoughtShape::Begun`]), written word for word, the model going on
/// from them, or leave it out, the turn beginning at its decision ([`ThoughtShape::None`]).
///
/// ```
/// use serde_json::json;
/// use tagloop_protocol::{ToolShape, TurnShape, parse_gbnf, turn_grammar};
///
/// let params = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
/// let shape = TurnShape::new(vec![ToolShape { name: "read_file", parameters: &params }]);
/// let gbnf = turn_grammar(&shape).to_gbnf();
/// assert!(gbnf.starts_with("root ::= (\"<thought>\" thought)?"));
/// assert!(parse_gbnf(&gbnf).is_ok());
/// ```
pub fn turn_grammar(shape: &TurnShape<'_>) -> Grammar {
    turn_grammar_with(shape, &KnownPaths::default())
}

/// [`turn_grammar`], with the parameters annotated [`PATH_ANNOTATION`](super::PATH_ANNOTATION)
/// limited to `paths` (free strings where `paths` has none of their kind).
pub fn turn_grammar_with(shape: &TurnShape<'_>, paths: &KnownPaths) -> Grammar {
    let mut g = Grammar::knowing(paths);
    let decision = decision(&mut g, shape);
    let not_lt = chars(true, &[ClassItem::Char('<')]);
    let gap = chars(false, &[ClassItem::Char(' '), ClassItem::Char('\n')]).repeat(0, Some(2));
    let mut root = Vec::new();
    if shape.think && !shape.opened_thought {
        // Reasoning is free up to its closing tag; the turn budget bounds it.
        g.define(
            "think",
            Expr::seq([
                Expr::lit("<think>"),
                not_lt.repeat(0, None),
                Expr::lit("</think>"),
                gap,
            ]),
        );
        root.push(Expr::rule("think").opt());
    }
    if shape.thought != ThoughtShape::None {
        thought(&mut g);
    }
    let open = if shape.opened_thought {
        ""
    } else {
        "<thought>"
    };
    match shape.thought {
        ThoughtShape::Begun(text) if fits_a_thought(text) => {
            // At least one word of the model's: letting it close the thought at once, the 1.5B
            // Qwen did, and then answered as it would have without the words.
            root.push(Expr::lit(format!("{open}{}", text.trim())));
            root.push(Expr::rule("thought-word").repeat(1, None));
            root.push(Expr::rule("thought-end"));
        }
        // An opened thought is closed at once, with nothing in it.
        ThoughtShape::None if shape.opened_thought => root.push(end_of_thought()),
        ThoughtShape::None => {}
        _ if shape.opened_thought => root.push(Expr::rule("thought")),
        // A model that knows its answer at once may give it without a thought (the reader
        // takes a decision with no thought); held to write one, small models loop in it.
        _ => root.push(Expr::seq([Expr::lit("<thought>"), Expr::rule("thought")]).opt()),
    }
    root.push(decision);
    g.define("root", Expr::seq(root));
    g
}

/// Whether `text` can begin a thought: one line with words, no tag in it.
fn fits_a_thought(text: &str) -> bool {
    !text.trim().is_empty() && !text.contains(['<', '\n', '\r'])
}

/// `thought ::= thought-word* thought-end`: one line of words, then the end of the thought.
/// Three rules, whatever the thought's length.
fn thought(g: &mut Grammar) {
    let visible = chars(
        true,
        &[
            ClassItem::Char('<'),
            ClassItem::Char(' '),
            ClassItem::Char('\t'),
            ClassItem::Char('\r'),
            ClassItem::Char('\n'),
        ],
    );
    let spaces = chars(false, &[ClassItem::Char(' '), ClassItem::Char('\t')]);
    // Up to two spaces or tabs between words; a newline ends the thought. A rule of its own:
    // llama.cpp limits how often a group may be repeated.
    g.define(
        "thought-word",
        Expr::seq([spaces.repeat(0, Some(2)), visible]),
    );
    // How models leave a thought: with its closing tag or not, then a newline, a blank line or
    // nothing before the decision's tag. Small models often go straight from the thought to
    // `<action>`: the reader ends an open thought there (docs/protocol.md §1.1.5).
    g.define("thought-end", end_of_thought());
    // The line may start on the line after the opening tag.
    let lead = blank().repeat(0, Some(2));
    g.define(
        "thought",
        Expr::seq([
            lead,
            Expr::rule("thought-word").repeat(0, None),
            Expr::rule("thought-end"),
        ]),
    );
}

/// A space, a tab or a newline.
fn blank() -> Expr {
    chars(
        false,
        &[
            ClassItem::Char(' '),
            ClassItem::Char('\t'),
            ClassItem::Char('\n'),
        ],
    )
}

/// How a thought ends: its closing tag or not (up to three blanks before it), then up to three
/// blanks before the decision's tag.
fn end_of_thought() -> Expr {
    let blanks = blank().repeat(0, Some(3));
    Expr::seq([
        Expr::seq([blanks.clone(), Expr::lit("</thought>")]).opt(),
        blanks,
    ])
}

/// The grammar of the decision alone, from its opening tag on: what a lazy grammar constrains
/// once one of [`LAZY_TRIGGERS`] appears.
pub fn decision_grammar(shape: &TurnShape<'_>) -> Grammar {
    decision_grammar_with(shape, &KnownPaths::default())
}

/// [`decision_grammar`], with path-valued parameters limited to `paths` (see
/// [`turn_grammar_with`]).
pub fn decision_grammar_with(shape: &TurnShape<'_>, paths: &KnownPaths) -> Grammar {
    let mut g = Grammar::knowing(paths);
    let decision = decision(&mut g, shape);
    g.define("root", decision);
    g
}

/// `action | final` (or `final` alone), defining the rules they need.
fn decision(g: &mut Grammar, shape: &TurnShape<'_>) -> Expr {
    let forbidden: Vec<String> = FORBIDDEN.iter().map(|w| w.to_string()).collect();
    let mut values = Values::new(g, forbidden.clone());
    // Defined below, after the tools' rules: no tool's rule may be named like them.
    for kept in ["call", "action", "action-closed"] {
        values.keep_name(kept);
    }
    // Taken back when a call is required: no rule of the answer is left unused.
    let before_final = values.mark();
    let final_body = match shape.output_schema {
        Some(schema) => {
            let json = values.within("the output schema", |v| {
                v.schema(schema, Place::Json, 0, "answer")
            });
            let ws = values.ws();
            // An object or array schema is already the rule `answer`.
            if json != Expr::rule("answer") {
                values.g.define("answer", json);
            }
            Expr::seq([ws.clone(), Expr::rule("answer"), ws])
        }
        None => {
            // A free answer may not spell the protocol's own tags either: a model that writes
            // `</thought>\n<action>…` inside its answer (gemma does, after a loop) is inventing
            // a next step, and no stop string would ever end it. Held back there, it reaches
            // `</final_answer>` instead.
            let mut answer_forbidden = forbidden.clone();
            answer_forbidden.extend(ANSWER_FORBIDDEN.iter().map(|w| w.to_string()));
            let rest = excluding(values.g, "answer-text", &answer_forbidden, &[], None, false);
            let first = chars(
                true,
                &[
                    ClassItem::Char(' '),
                    ClassItem::Char('\t'),
                    ClassItem::Char('\r'),
                    ClassItem::Char('\n'),
                    ClassItem::Char('<'),
                ],
            );
            values
                .g
                .define("answer", Expr::seq([first, Expr::rule(rest)]));
            Expr::rule("answer")
        }
    };
    // Closing tags are optional: a model may end its turn right after the answer or the call
    // (the reader closes an open block at the end of the turn), instead of being held in the
    // grammar until it writes them.
    values.g.define(
        "final",
        Expr::seq([
            Expr::lit("<final_answer>"),
            final_body,
            Expr::lit("</final_answer>").opt(),
        ]),
    );
    let tools: Vec<&ToolShape<'_>> = shape.tools.iter().filter(|t| callable(t.name)).collect();
    if shape.final_only || tools.is_empty() {
        return Expr::rule("final");
    }
    if shape.call_required {
        values.rollback(before_final);
    }
    let calls: Vec<Expr> = tools.iter().map(|t| call(&mut values, t)).collect();
    values.g.define("call", Expr::alt(calls));
    action(values.g, shape.max_calls);
    if shape.call_required {
        return Expr::rule("action");
    }
    Expr::alt([Expr::rule("action"), Expr::rule("final")])
}

/// `action`: one `<action>` block, or with `max_calls` above one, up to that many one after
/// another, every block but the last closed (`action-closed`) and at most two blanks between
/// them; the last block's closing tag is optional, as a stop string may take it.
fn action(g: &mut Grammar, max_calls: usize) {
    let block = |closed: bool| {
        let close = Expr::lit("</action>");
        Expr::seq([
            Expr::lit("<action>"),
            Expr::rule("call"),
            if closed { close } else { close.opt() },
        ])
    };
    let Some(more) = max_calls.checked_sub(2) else {
        g.define("action", block(false));
        return;
    };
    let more = u32::try_from(more).unwrap_or(u32::MAX - 1) + 1;
    let gap = chars(false, &[ClassItem::Char(' '), ClassItem::Char('\n')]).repeat(0, Some(2));
    g.define("action-closed", block(true));
    g.define(
        "action",
        Expr::seq([
            Expr::seq([Expr::rule("action-closed"), gap]).repeat(0, Some(more)),
            block(false),
        ]),
    );
}

/// Whether a parameter name can be written as `name=value`.
fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `tool(name=value, …)`: required parameters in declared order, then any optional ones in
/// order. A tool with a parameter name that is not an identifier takes positional values, in
/// declared order, of which only a tail of optional ones may be left out. When the parameters'
/// rules do not fit the grammar's budget the call takes any `name=value` arguments instead (and
/// the grammar records it in [`Grammar::simplified`]).
fn call(values: &mut Values<'_>, tool: &ToolShape<'_>) -> Expr {
    let rule = values.reserve(&format!("call-{}", tool.name));
    let label = format!("the parameters of tool `{}`", tool.name);
    values.within(&label, |v| {
        let mark = v.mark();
        let written = call_args(v, tool, &rule)
            .map(|args| Expr::seq([Expr::lit(format!("{}(", tool.name)), args, Expr::lit(")")]));
        if !written.is_some_and(|e| v.define_charged(&rule, e)) {
            v.rollback(mark);
            let value = v.simplify();
            let args = any_arguments(v, value);
            v.g.define(
                rule.clone(),
                Expr::seq([Expr::lit(format!("{}(", tool.name)), args, Expr::lit(")")]),
            );
        }
    });
    Expr::rule(rule)
}

/// The arguments of a call as the tool's parameters say; `None` when they do not fit the budget.
fn call_args(values: &mut Values<'_>, tool: &ToolShape<'_>, rule: &str) -> Option<Expr> {
    let empty = serde_json::Map::new();
    let props = tool
        .parameters
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required = required(tool.parameters);
    let sep = Expr::seq([Expr::lit(","), Expr::lit(" ").opt()]);
    let named = props.keys().all(|k| is_ident(k));
    if named {
        let arg = |name: &str| {
            let name = Expr::lit(format!("{name}="));
            move |value: Expr| Expr::seq([name.clone(), value])
        };
        let least = props
            .keys()
            .map(|k| arg(k)(Expr::rule("value")).gbnf_len())
            .sum();
        let mut members = Members::start(values, rule, props.len(), least, required.is_empty())?;
        for (name, schema) in props {
            let base = format!("{rule}-{name}");
            values.budget.path.push(format!("properties/{name}"));
            members.add(
                values,
                required.contains(name.as_str()),
                |v| v.schema(schema, Place::Argument, 0, &base),
                arg(name),
            );
            values.budget.path.pop();
        }
        return members.finish(values, &sep);
    }
    // Positional: everything up to the last required parameter is written, then a prefix of
    // the optional ones after it.
    let mut items: Vec<(bool, Expr)> = Vec::new();
    for (name, schema) in props {
        let value = values.schema(schema, Place::Argument, 0, &format!("{rule}-{name}"));
        if !values.room(value.gbnf_len()) {
            return None;
        }
        items.push((required.contains(name.as_str()), value));
    }
    let fixed = items.iter().rposition(|(r, _)| *r).map_or(0, |i| i + 1);
    let tail: Vec<Expr> = items.split_off(fixed).into_iter().map(|(_, e)| e).collect();
    let head: Vec<Expr> = items.into_iter().map(|(_, e)| e).collect();
    nested_tail(values, rule, head, tail, &sep)
}

/// Any `name=value` arguments: the call of a tool whose parameters are too large for a grammar.
fn any_arguments(values: &mut Values<'_>, value: Expr) -> Expr {
    if !values.g.has("arg-name") {
        values.g.define(
            "arg-name",
            Expr::seq([
                chars(
                    false,
                    &[
                        ClassItem::Range('a', 'z'),
                        ClassItem::Range('A', 'Z'),
                        ClassItem::Char('_'),
                    ],
                ),
                chars(
                    false,
                    &[
                        ClassItem::Range('a', 'z'),
                        ClassItem::Range('A', 'Z'),
                        ClassItem::Range('0', '9'),
                        ClassItem::Char('_'),
                    ],
                )
                .repeat(0, Some(63)),
            ]),
        );
    }
    let arg = Expr::seq([Expr::rule("arg-name"), Expr::lit("="), value]);
    let sep = Expr::seq([Expr::lit(","), Expr::lit(" ").opt()]);
    Expr::seq([arg.clone(), Expr::seq([sep, arg]).repeat(0, None)]).opt()
}

/// Positional values: all of `head`, then a prefix of `tail`. Up to three in the tail it is
/// written nested, `(sep t1 (sep t2 (…)?)?)?`; a longer tail is a chain of rules
/// (`{rule}-tail-k ::= (sep t_k {rule}-tail-k+1)?`), so the text never nests deeper than that
/// (our checker and llama.cpp's parser both recurse on parentheses). `None` when the chain does
/// not fit the budget.
fn nested_tail(
    values: &mut Values<'_>,
    rule: &str,
    head: Vec<Expr>,
    tail: Vec<Expr>,
    sep: &Expr,
) -> Option<Expr> {
    let mut out = Vec::new();
    let lead = !head.is_empty();
    for (i, h) in head.into_iter().enumerate() {
        if i > 0 {
            out.push(sep.clone());
        }
        out.push(h);
    }
    let chain = tail.len() > 3;
    let base = format!("{rule}-tail");
    // Build the optional tail from the end.
    let mut acc: Option<Expr> = None;
    for (i, t) in tail.into_iter().enumerate().rev() {
        let with_sep = if i == 0 && !lead {
            t
        } else {
            Expr::seq([sep.clone(), t])
        };
        let item = match acc.take() {
            Some(rest) => Expr::seq([with_sep, rest]),
            None => with_sep,
        };
        let item = item.opt();
        acc = Some(if chain {
            let name = values.fresh(&base);
            if !values.define_charged(&name, item) {
                return None;
            }
            Expr::rule(name)
        } else {
            item
        });
    }
    out.extend(acc);
    Some(Expr::seq(out))
}
