//! Reading the upstream's turn as an answer for the client: the turn reader (dialects too),
//! then every call parsed, bound to its tool and validated against the tool's JSON Schema, the
//! answer checked against `response_format` and `tool_choice`. Anything else is a refusal whose
//! text is tagloop's correction, which the core sends upstream as the next observation.
//!
//! Several calls in one turn (`parallel_tool_calls`) are read one after another: the turn reader
//! decides on the first `<action>`, and the text after it is read again as long as it starts with
//! another `<action>` block, up to [`MAX_PARALLEL_CALLS`]. A call identical to one already
//! read in the turn (same tool, same arguments) is dropped, and so is a last block that the
//! token limit cut before its call was whole, when complete calls come before it.
//!
//! Under `tool_choice: auto`, a call the conversation already made since the last user message
//! (same tool, same arguments, compared as the call would go out: after `unsaid-optional` where
//! it is on; its result is in the history the client sent) is dropped too; a
//! turn whose every call is such a repeat is refused with [`Refusal::answer_next`] set, and the
//! core asks again for an answer only (answer.rs).

use crate::policy::{Choice, Decision, Entry, PastCall, Policies, Policy, unsaid};
use serde_json::{Map, Value};

use super::request::{Ask, MAX_PARALLEL_CALLS};
use super::thought::ThoughtMode;
use crate::agent::Role;
use crate::agent::correction::Correction;
use crate::agent::finalcheck::{self, Verdict};
use crate::llm::Finish;
use crate::protocol::{self, Call, Turn, TurnKind};

/// A turn that could be read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Read {
    /// The thought(s) and removed reasoning, for `reasoning_content`.
    pub thought: Option<String>,
    pub decision: Decision,
}

/// A turn that cannot be used: what the model is told, and what of its turn the history keeps.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    pub message: String,
    pub kept: String,
    /// The turn only repeated calls already answered: the next turn is asked for an answer.
    pub answer_next: bool,
}

/// Read `text` (the turn as the reader should see it) for `ask`; with `answer_only`, a call is
/// refused whatever `tool_choice` allowed.
pub(crate) fn read(
    text: &str,
    finish: &Finish,
    ask: &Ask,
    role: &Role,
    answer_only: bool,
    thought: ThoughtMode,
    policies: Policies,
) -> Result<Read, Refusal> {
    // Under `--thought none` a correction does not ask for the thought the turn cannot hold.
    let say = |c: Correction| {
        if thought.taught() {
            c.message()
        } else {
            c.message_without_thought()
        }
    };
    let names: Vec<&str> = ask.tools.iter().map(|t| t.name.as_str()).collect();
    let turn = protocol::read_turn_with(text, &names);
    let kept = turn.kept_text(text);
    let refuse = |message: String| Refusal {
        message,
        kept: kept.clone(),
        answer_next: false,
    };
    if *finish == Finish::Repeated {
        return Err(refuse(say(Correction::Repetition)));
    }
    let thought = match (&turn.reasoning, &turn.thought) {
        (Some(r), Some(t)) => Some(format!("{r}\n\n{t}")),
        (r, t) => r.clone().or_else(|| t.clone()),
    };
    let decision = match turn.kind {
        TurnKind::None if *finish == Finish::Length => {
            return Err(refuse(say(Correction::Truncated)));
        }
        TurnKind::None => return Err(refuse(say(Correction::NoDecision))),
        TurnKind::Final => {
            if matches!(ask.choice, Choice::Required | Choice::Named(_)) {
                return Err(refuse(must_call(ask)));
            }
            let answer = turn.final_text.as_deref().unwrap_or_default();
            match finalcheck::check(answer, role) {
                Verdict::Accepted { value, .. } => Decision::Answer {
                    text: match value {
                        Value::String(s) if role.output_schema().is_none() => s,
                        v => v.to_string(),
                    },
                    cut: !turn.deciding_closed && *finish == Finish::Length,
                },
                Verdict::Refused(why) => return Err(refuse(why)),
            }
        }
        TurnKind::Action => {
            if answer_only || matches!(ask.choice, Choice::None) || ask.tools.is_empty() {
                return Err(refuse(
                    "No tool may be called in this turn: give your final answer.".into(),
                ));
            }
            let first = one_call(&turn, finish, ask).map_err(&refuse)?;
            let mut calls = vec![first];
            let mut rest = &text[turn.history_end.min(text.len())..];
            // Blocks, not kept calls, are counted: dropped repeats use up the limit too.
            let mut blocks = 1;
            while ask.parallel && blocks < MAX_PARALLEL_CALLS && opens_action(rest) {
                blocks += 1;
                let next = protocol::read_turn_with(rest, &names);
                if next.kind != TurnKind::Action {
                    break;
                }
                let call = match one_call(&next, finish, ask) {
                    Ok(call) => call,
                    // The last block, cut by the token limit inside its call (an unclosed
                    // block can only be the last): the calls before it are complete and
                    // usable on their own, so the turn is not refused for it; it is dropped.
                    Err(_) if *finish == Finish::Length && !next.deciding_closed => break,
                    Err(message) => return Err(refuse(message)),
                };
                // A call written again with the same arguments in the same turn is the model
                // repeating itself (small models loop on the block they just wrote), not a
                // second request: the client would run the same thing twice.
                if !calls.contains(&call) {
                    calls.push(call);
                }
                rest = &rest[next.history_end.min(rest.len())..];
            }
            // The `answered-call` policy: calls already made since the question, their
            // results in the conversation, are not the client's to run again.
            if ask.choice == Choice::Auto && policies.on(Policy::AnsweredCall) {
                let answered = answered_calls(ask);
                let first = calls[0].0.clone();
                // A call is compared as it would go out: with `unsaid-optional` on, the
                // answered call went out without the optional values nobody gave, and the model
                // that writes it again with them (`days=7` beside the same city) would send the
                // client the very call it ran.
                // (The conversation's words are read only when a call of an answered tool
                // could be one.)
                let view = (!answered.is_empty() && policies.on(Policy::UnsaidOptional))
                    .then(|| ask.view());
                let sent = |name: &str, args: &Map<String, Value>| {
                    let view = view.as_ref()?;
                    answered.iter().any(|p| p.name == name).then_some(())?;
                    unsaid::without_unsaid(view, name, args).map(|(kept, _)| kept)
                };
                calls.retain(|(name, args)| {
                    let as_sent = sent(name, args);
                    !answered.iter().any(|p| {
                        &p.name == name
                            && (&p.arguments == args || as_sent.as_ref() == Some(&p.arguments))
                    })
                });
                if calls.is_empty() {
                    return Err(Refusal {
                        answer_next: true,
                        ..refuse(format!(
                            "You already called {first} with these arguments, and its result is in an <observation> above. Do not call it again: give your final answer from the results you have."
                        ))
                    });
                }
            }
            Decision::Calls(calls)
        }
    };
    Ok(Read { thought, decision })
}

/// The calls the conversation made since its last user message (their results are in it).
fn answered_calls(ask: &Ask) -> Vec<&PastCall> {
    let since = ask
        .conversation
        .iter()
        .rposition(|e| matches!(e, Entry::Question(_)))
        .map_or(0, |i| i + 1);
    ask.conversation[since..]
        .iter()
        .flat_map(|e| match e {
            Entry::Calls { calls, .. } => calls.as_slice(),
            _ => &[],
        })
        .collect()
}

/// The correction for an answer where a call was required.
fn must_call(ask: &Ask) -> String {
    match &ask.choice {
        Choice::Named(n) => {
            format!("You must call the tool `{n}` in this turn: write one <action> that calls it.")
        }
        _ => "You must call a tool in this turn: write an <action>, not a final answer.".into(),
    }
}

/// Whether `s` starts (after white space) with an `<action` tag.
fn opens_action(s: &str) -> bool {
    let s = s.trim_start().as_bytes();
    s.len() >= 7 && s[..7].eq_ignore_ascii_case(b"<action")
}

/// The deciding action of `turn`, parsed, bound and validated.
fn one_call(
    turn: &Turn,
    finish: &Finish,
    ask: &Ask,
) -> Result<(String, Map<String, Value>), String> {
    if let (Some(d), Some(error)) = (turn.dialect, &turn.dialect_error) {
        return Err(Correction::Dialect {
            dialect: d.name(),
            error: error.clone(),
        }
        .message());
    }
    one_call_of(turn.action.as_deref().unwrap_or_default(), finish, ask)
}

/// The call of `action` (a turn's deciding action), parsed, bound and validated.
fn one_call_of(
    action: &str,
    finish: &Finish,
    ask: &Ask,
) -> Result<(String, Map<String, Value>), String> {
    let accept = |c: &Call| {
        ask.tool(&c.tool)
            .is_some_and(|t| protocol::bind(&c.args, &t.parameters).is_ok())
    };
    let call = protocol::parse_action_with(action, &accept).map_err(|e| {
        Correction::ParseError {
            message: e.message,
            offset: e.offset,
            cut: e.open_string.then(|| finish.clone()),
        }
        .message()
    })?;
    let names = || ask.tools.iter().map(|t| t.name.clone()).collect();
    let Some(tool) = ask.tool(&call.tool) else {
        return Err(Correction::UnknownTool {
            closest: None,
            names: names(),
            name: call.tool,
        }
        .message());
    };
    if let Choice::Named(n) = &ask.choice
        && n != &tool.name
    {
        return Err(must_call(ask));
    }
    let args = protocol::bind_tool(&tool.name, &call.args, &tool.parameters).map_err(|e| {
        Correction::BadArguments {
            tool: tool.name.clone(),
            error: e.to_string(),
        }
        .message()
    })?;
    let value = Value::Object(args);
    let errors: Vec<String> = tool
        .validator
        .iter_errors(&value)
        .take(10)
        .map(|e| {
            let path = e.instance_path().to_string();
            format!(
                "{}: {e}",
                if path.is_empty() {
                    "(arguments)"
                } else {
                    &path
                }
            )
        })
        .collect();
    if !errors.is_empty() {
        return Err(Correction::BadArguments {
            tool: tool.name.clone(),
            error: errors.join("; "),
        }
        .message());
    }
    let Value::Object(args) = value else {
        return Err("internal: arguments are not an object".into());
    };
    Ok((tool.name.clone(), args))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{ThoughtMode, read};
    use crate::llm::Finish;
    use crate::serve::conversation;
    use crate::serve::request::{Ask, parse_json};

    fn ask(required: &[&str]) -> Ask {
        let body = json!({"messages": [{"role": "user", "content": "Area of a circle of radius 5?"}],
            "parallel_tool_calls": false,
            "tools": [{"type": "function", "function": {"name": "area_circle",
                "parameters": {"type": "object", "properties": {
                    "radius": {"type": "number"}, "unit": {"type": "string"}},
                  "required": required}}}]});
        Ask::read(&parse_json(body.to_string().as_bytes()).unwrap()).unwrap()
    }

    /// A turn the degeneration guard cut (BFCL's simple_python_9: a string that ran on into
    /// the protocol's next blocks) is corrected for repeating itself, whatever its call would
    /// bind to without that string: reading it without the string (the `runaway` rule) changed
    /// no validation total on any lab model and was deleted (docs/configuration.md).
    #[test]
    fn a_turn_the_guard_cut_is_corrected_for_repeating_itself() {
        let text = format!(
            "<thought>I call it.</thought>\n<action>area_circle(radius=5, unit=\"){}",
            "</thought> <final_answer>78.54</final_answer> <thought>Again.".repeat(3)
        );
        for required in [&["radius"][..], &["radius", "unit"][..]] {
            let a = ask(required);
            let role = conversation::role(&a).unwrap();
            let refused = read(
                &text,
                &Finish::Repeated,
                &a,
                &role,
                false,
                ThoughtMode::Free,
                crate::policy::Policies::all(),
            )
            .expect_err("a cut turn is corrected");
            assert!(refused.message.contains("repeating"), "{}", refused.message);
        }
    }

    /// `answered-call` compares a call as it would go out: the circle's area, answered for
    /// radius 5, written again with a `unit` nobody gave is the same call once `unsaid-optional`
    /// leaves the unit out, so it is refused and the answer asked for; with `unsaid-optional`
    /// off the unit would go out, a call the client has not run, and it stands.
    #[test]
    fn a_call_answered_before_is_refused_as_it_would_be_sent() {
        use crate::policy::{Decision, Policies, Policy};
        let body = json!({"messages": [
                {"role": "user", "content": "Area of a circle of radius 5?"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "area_circle", "arguments": "{\"radius\": 5}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "78.54"}],
            "tools": [{"type": "function", "function": {"name": "area_circle",
                "parameters": {"type": "object", "properties": {
                    "radius": {"type": "number"}, "unit": {"type": "string"}},
                  "required": ["radius"]}}}]});
        let a = Ask::read(&parse_json(body.to_string().as_bytes()).unwrap()).unwrap();
        let role = conversation::role(&a).unwrap();
        let turn = "<action>area_circle(radius=5, unit=\"m\")</action>";
        let read_with = |policies| {
            read(
                turn,
                &Finish::End,
                &a,
                &role,
                false,
                ThoughtMode::None,
                policies,
            )
        };
        let refused = read_with(Policies::all()).expect_err("the same call as sent");
        assert!(refused.answer_next);
        assert!(
            refused.message.contains("already called area_circle"),
            "{}",
            refused.message
        );
        let kept = read_with(Policies::all().without(Policy::UnsaidOptional))
            .unwrap_or_else(|r| panic!("{}", r.message));
        assert!(matches!(kept.decision, Decision::Calls(ref c) if c.len() == 1));
        // Another radius is another call, whatever the unit.
        let other = "<action>area_circle(radius=6, unit=\"m\")</action>";
        assert!(
            read(
                other,
                &Finish::End,
                &a,
                &role,
                false,
                ThoughtMode::None,
                Policies::all()
            )
            .is_ok()
        );
    }
}
