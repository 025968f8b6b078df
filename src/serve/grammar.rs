//! The grammar of one request's turn, for upstreams that constrain sampling to one
//! (docs/protocol.md §1.7), written from the request's tools, `tool_choice`,
//! `parallel_tool_calls` and `response_format`:
//!
//! | request | the turn's decision |
//! |---|---|
//! | `auto` | `action \| final` (the agent's own turn grammar) |
//! | `required` | `action` only |
//! | a named function | `action` over that tool only |
//! | `none` (or no tools) | `final` only |
//! | `parallel_tool_calls` (default) | `action` is 1..=[`MAX_PARALLEL_CALLS`] action blocks, each but the last closed |
//!
//! The protocol crate writes the turn grammar; this module rewrites two of its rules in the
//! GBNF text (`final` becomes `action` when a call is required; `action` becomes a repetition of
//! closed actions ending in the original one when calls may come in parallel) and checks the
//! result with the crate's own GBNF reader before it is sent: a grammar that does not read back
//! is never sent (the turn then goes unconstrained, and is still read and validated).

use std::sync::Arc;

use tracing::warn;

use super::request::{Ask, Choice, MAX_PARALLEL_CALLS};
use crate::llm::{Api, TurnGrammar};
use crate::protocol::{TurnShape, parse_gbnf, turn_grammar};
use crate::shown::Outside;

/// The grammar for `ask`'s turn; `None` when it cannot be written (then nothing is sent).
pub(crate) fn for_request(ask: &Ask, api: Api) -> Option<Arc<TurnGrammar>> {
    build(ask, api, false)
}

/// The grammar of a turn that may only answer, whatever `tool_choice` allowed: the turn after
/// one that only repeated calls already answered, or after the repair budget (answer.rs).
pub(crate) fn answer_only(ask: &Ask, api: Api) -> Option<Arc<TurnGrammar>> {
    build(ask, api, true)
}

fn build(ask: &Ask, api: Api, answer_only: bool) -> Option<Arc<TurnGrammar>> {
    let tools = ask.offered_tools();
    let final_only = answer_only || matches!(ask.choice, Choice::None) || tools.is_empty();
    let shape = TurnShape {
        tools,
        output_schema: ask.output_schema.as_ref(),
        final_only,
        opened_thought: api == Api::Completions,
        think: false,
    };
    let mut gbnf = turn_grammar(&shape).to_gbnf();
    if !final_only {
        if matches!(ask.choice, Choice::Required | Choice::Named(_)) {
            gbnf = rewrite_rule(&gbnf, "final", |_| "action".to_string())?;
        }
        if ask.parallel {
            gbnf = parallel(&gbnf)?;
        }
    }
    if let Err(e) = parse_gbnf(&gbnf) {
        warn!(error = %Outside(&e), "the request's grammar failed its own check; the turn is not constrained");
        return None;
    }
    Some(Arc::new(TurnGrammar {
        gbnf,
        lazy: None,
        lark: None,
    }))
}

/// `action ::= X` becomes `action-one ::= X` and `action ::= (action-closed gap){0,N-1}
/// action-one`, where `action-closed` is X with its closing tag required: a turn may hold up
/// to N calls, and every call but the last ends in `</action>` (which is then not a stop).
fn parallel(gbnf: &str) -> Option<String> {
    let mut one = String::new();
    let renamed = rewrite_rule(gbnf, "action", |body| {
        one = body.to_string();
        format!(
            "(action-closed [ \\n]{{0,2}}){{0,{}}} action-one",
            MAX_PARALLEL_CALLS - 1
        )
    })?;
    // The closing tag is written optional (`"</action>"?`); the closed form requires it.
    let closed = one.replace("\"</action>\"?", "\"</action>\"");
    if closed == one {
        return None;
    }
    Some(format!(
        "{renamed}action-one ::= {one}\naction-closed ::= {closed}\n"
    ))
}

/// Replace the body of rule `name` (one line, `name ::= body`) with `f(body)`; `None` when the
/// grammar has no such rule.
fn rewrite_rule(gbnf: &str, name: &str, f: impl FnOnce(&str) -> String) -> Option<String> {
    let head = format!("{name} ::= ");
    let mut f = Some(f);
    let mut found = false;
    let mut out = String::with_capacity(gbnf.len() + 128);
    for line in gbnf.lines() {
        match (line.strip_prefix(&head), f.take()) {
            (Some(body), Some(rewrite)) => {
                found = true;
                out.push_str(&head);
                out.push_str(&rewrite(body));
            }
            (_, rest) => {
                f = rest;
                out.push_str(line);
            }
        }
        out.push('\n');
    }
    found.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::request::parse_json;

    fn ask(extra: &str) -> Ask {
        let body = format!(
            r#"{{"messages": [{{"role": "user", "content": "hi"}}],
            "tools": [{{"type": "function", "function": {{"name": "add", "parameters":
              {{"type": "object", "properties": {{"a": {{"type": "integer"}}}}, "required": ["a"]}}}}}},
              {{"type": "function", "function": {{"name": "sub"}}}}]{extra}}}"#
        );
        Ask::read(&parse_json(body.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn every_choice_gives_a_grammar_that_reads_back() {
        for extra in [
            "",
            r#", "tool_choice": "required""#,
            r#", "tool_choice": "none""#,
            r#", "tool_choice": {"type": "function", "function": {"name": "sub"}}"#,
            r#", "parallel_tool_calls": false"#,
        ] {
            let g = for_request(&ask(extra), Api::Chat).expect(extra);
            parse_gbnf(&g.gbnf).unwrap();
        }
    }

    #[test]
    fn required_leaves_no_answer_and_none_no_call() {
        let g = for_request(&ask(r#", "tool_choice": "required""#), Api::Chat).unwrap();
        assert!(g.gbnf.contains("final ::= action\n"), "{}", g.gbnf);
        let g = for_request(&ask(r#", "tool_choice": "none""#), Api::Chat).unwrap();
        assert!(!g.gbnf.contains("<action>"), "{}", g.gbnf);
    }

    #[test]
    fn answer_only_leaves_no_call_whatever_the_choice() {
        for extra in ["", r#", "tool_choice": "required""#] {
            let g = answer_only(&ask(extra), Api::Chat).unwrap();
            assert!(!g.gbnf.contains("<action>"), "{}", g.gbnf);
            assert!(g.gbnf.contains("<final_answer>"), "{}", g.gbnf);
        }
    }

    #[test]
    fn a_named_tool_is_the_only_call() {
        let g = for_request(
            &ask(r#", "tool_choice": {"type": "function", "function": {"name": "sub"}}"#),
            Api::Chat,
        )
        .unwrap();
        assert!(g.gbnf.contains("\"sub(\""));
        assert!(!g.gbnf.contains("\"add(\""));
    }

    #[test]
    fn parallel_calls_repeat_closed_actions() {
        let g = for_request(&ask(""), Api::Chat).unwrap();
        assert!(g.gbnf.contains("action-closed"), "{}", g.gbnf);
        let g = for_request(&ask(r#", "parallel_tool_calls": false"#), Api::Chat).unwrap();
        assert!(!g.gbnf.contains("action-closed"));
    }
}
