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
//! The thought before the decision is the model's own, optional; under `--thought none`
//! ([`ThoughtMode::None`]) a turn that may call has none: the grammar begins at the decision.
//! Turns that may only answer keep theirs (the answer after a declined call begins it in the
//! runtime's words).
//!
//! Each row is a [`TurnShape`] of the protocol crate, which writes the grammar (GBNF, and Lark
//! for an upstream that takes llguidance, as a run's turns do); the GBNF is checked with the
//! crate's own reader before it is sent: a grammar that does not read back is never sent (the
//! turn then goes unconstrained, and is still read and validated).

use std::sync::Arc;

use tracing::warn;

use super::conversation::allows_calls;
use super::request::{Ask, MAX_PARALLEL_CALLS};
use super::thought::ThoughtMode;
use crate::llm::{Api, TurnGrammar};
use crate::policy::Choice;
use crate::prompt::DECLINED_THOUGHT;
use crate::protocol::{ThoughtShape, TurnShape, parse_gbnf, turn_grammar};
use crate::shown::Outside;

/// The grammar for `ask`'s turn; `None` when it cannot be written (then nothing is sent).
pub(crate) fn for_request(ask: &Ask, api: Api, thought: ThoughtMode) -> Option<Arc<TurnGrammar>> {
    build(&shape(ask, api, thought, false))
}

/// The grammar of a turn that may only answer, whatever `tool_choice` allowed: the turn after
/// one that only repeated calls already answered, or after the repair budget (answer.rs).
pub(crate) fn answer_only(ask: &Ask, api: Api, thought: ThoughtMode) -> Option<Arc<TurnGrammar>> {
    build(&shape(ask, api, thought, true))
}

/// The grammar of the answer after the turn's calls were declined (a guess or the grounding,
/// answer.rs): [`answer_only`]'s, the thought begun in the runtime's words
/// ([`DECLINED_THOUGHT`]); the model's own would be the one that led to the calls.
pub(crate) fn after_decline(ask: &Ask, api: Api, thought: ThoughtMode) -> Option<Arc<TurnGrammar>> {
    build(&shape(ask, api, thought, true).thought(ThoughtShape::Begun(DECLINED_THOUGHT)))
}

/// The grammar of one call of `tool` alone, whatever `tool_choice` allowed: the re-ask for
/// the tool the question's words name (policy/choose.rs).
pub(crate) fn one_call_of(
    ask: &Ask,
    api: Api,
    thought: ThoughtMode,
    tool: &str,
) -> Option<Arc<TurnGrammar>> {
    build(&shape(ask, api, thought, false).named(tool).max_calls(1))
}

/// The grammar of a turn continued after its thought was cut and closed (answer.rs): its
/// decision alone, whichever the turn could make. The thought is in the prompt already; a
/// grammar that opens one has the model write it again (gemma, asked for the answer after a
/// declined call, wrote the runtime's words and a count of `1.444…` a second time, then a
/// third, until a 502).
pub(crate) fn after_thought(
    ask: &Ask,
    api: Api,
    thought: ThoughtMode,
    answer_only: bool,
) -> Option<Arc<TurnGrammar>> {
    build(
        &shape(ask, api, thought, answer_only)
            .opened_thought(false)
            .thought(ThoughtShape::None),
    )
}

/// What `ask`'s turn may hold. The tools offered are already the named one alone under a
/// named `tool_choice` ([`Ask::offered_tools`]).
fn shape(ask: &Ask, api: Api, thought: ThoughtMode, answer_only: bool) -> TurnShape<'_> {
    let required = matches!(ask.choice, Choice::Required | Choice::Named(_));
    let shape = TurnShape::new(ask.offered_tools())
        .output_schema(ask.output_schema.as_ref())
        .final_only(answer_only || matches!(ask.choice, Choice::None))
        .opened_thought(thought.opened(api))
        .call_required(required)
        .max_calls(if ask.parallel { MAX_PARALLEL_CALLS } else { 1 });
    if thought == ThoughtMode::None && !answer_only && allows_calls(ask) {
        shape.thought(ThoughtShape::None)
    } else {
        shape
    }
}

fn build(shape: &TurnShape<'_>) -> Option<Arc<TurnGrammar>> {
    let grammar = turn_grammar(shape);
    let gbnf = grammar.to_gbnf();
    if let Err(e) = parse_gbnf(&gbnf) {
        warn!(error = %Outside(&e), "the request's grammar failed its own check; the turn is not constrained");
        return None;
    }
    Some(Arc::new(TurnGrammar {
        gbnf,
        lazy: None,
        lark: Some(grammar.to_lark()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::request::parse_json;

    const FREE: ThoughtMode = ThoughtMode::Free;
    const NONE: ThoughtMode = ThoughtMode::None;

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
            let g = for_request(&ask(extra), Api::Chat, FREE).expect(extra);
            parse_gbnf(&g.gbnf).unwrap();
        }
    }

    #[test]
    fn required_leaves_no_answer_and_none_no_call() {
        let g = for_request(&ask(r#", "tool_choice": "required""#), Api::Chat, FREE).unwrap();
        assert!(!g.gbnf.contains("<final_answer>"), "{}", g.gbnf);
        let g = for_request(&ask(r#", "tool_choice": "none""#), Api::Chat, FREE).unwrap();
        assert!(!g.gbnf.contains("<action>"), "{}", g.gbnf);
    }

    #[test]
    fn answer_only_leaves_no_call_whatever_the_choice() {
        for extra in ["", r#", "tool_choice": "required""#] {
            let g = answer_only(&ask(extra), Api::Chat, FREE).unwrap();
            assert!(!g.gbnf.contains("<action>"), "{}", g.gbnf);
            assert!(g.gbnf.contains("<final_answer>"), "{}", g.gbnf);
        }
    }

    #[test]
    fn a_named_tool_is_the_only_call() {
        let g = for_request(
            &ask(r#", "tool_choice": {"type": "function", "function": {"name": "sub"}}"#),
            Api::Chat,
            FREE,
        )
        .unwrap();
        assert!(g.gbnf.contains("\"sub(\""));
        assert!(!g.gbnf.contains("\"add(\""));
    }

    #[test]
    fn parallel_calls_repeat_closed_actions() {
        let g = for_request(&ask(""), Api::Chat, FREE).unwrap();
        assert!(g.gbnf.contains("action-closed"), "{}", g.gbnf);
        let g = for_request(&ask(r#", "parallel_tool_calls": false"#), Api::Chat, FREE).unwrap();
        assert!(!g.gbnf.contains("action-closed"));
    }

    #[test]
    fn without_a_thought_only_the_turns_that_may_call_lose_it() {
        for api in [Api::Chat, Api::Completions] {
            for extra in ["", r#", "tool_choice": "required""#] {
                let g = for_request(&ask(extra), api, NONE).unwrap();
                // The completions prompt opens no thought either: none to close.
                assert!(!g.gbnf.contains("\"<thought>\""), "{}", g.gbnf);
                assert!(!g.gbnf.contains("</thought>"), "{}", g.gbnf);
                assert!(!g.gbnf.contains("thought-word"), "{}", g.gbnf);
                let free = for_request(&ask(extra), api, FREE).unwrap();
                assert!(free.gbnf.contains("thought-word"), "{}", free.gbnf);
            }
            let named = one_call_of(&ask(""), api, NONE, "sub").unwrap();
            assert!(!named.gbnf.contains("thought-word"), "{}", named.gbnf);
            // Turns that may only answer keep the model's thought, or the runtime's words.
            let g = answer_only(&ask(""), api, NONE).unwrap();
            assert!(g.gbnf.contains("thought-word"), "{}", g.gbnf);
            let g = for_request(&ask(r#", "tool_choice": "none""#), api, NONE).unwrap();
            assert!(g.gbnf.contains("thought-word"), "{}", g.gbnf);
            let g = after_decline(&ask(""), api, NONE).unwrap();
            // The completions prompt opens no thought then: the grammar writes its tag.
            let begun = format!("\"<thought>{DECLINED_THOUGHT}\"");
            assert!(g.gbnf.contains(&begun), "{}", g.gbnf);
        }
    }
}
