//! The core: one request with tools in, the events of its answer out.
//!
//! The request becomes the history of a run (`conversation.rs`); the upstream is asked for one
//! turn with tagloop's stops and, where it takes one, the request's grammar (`grammar.rs`),
//! through the turn engine a run's turns go through too (`agent/turn/`; serve's seat in it is
//! `seat.rs`); the turn is read, bound and validated (`read.rs`). A turn that cannot be used is
//! corrected upstream, continuing the same conversation with tagloop's correction as the
//! observation, at most `repairs` times; nothing reaches the client before a turn is usable, and
//! after the budget the client gets a 502 `upstream_error` naming the last reason. A turn cut
//! inside its thought (by the token budget or the degeneration guard) is not corrected but
//! closed where it was cut and continued to its decision, once a request, by the engine
//! (`policy/thought_cut.rs`): asked again at temperature 0, a small model writes the same
//! endless thought again, and the repair
//! budget ran out on it (issue 32: gemma's and SmolLM2's 502s). Events are emitted
//! once the answer is decided: the reasoning, then each tool call (or the answer's text), then
//! `Done` with the usage of every upstream request made.
//!
//! An answer that no correction can replace is decided before its turn ends: `live.rs` watches
//! the turn as it streams, and once it commits the turn the thought and the answer's text go
//! out as they arrive; the core then sends only what the whole reading adds to them, so the
//! streamed and the collected answer are the same text. The whole (non-streamed) answer is
//! these same events, collected.

use crate::agent::turn::{self, CloseThought, Rules, TurnFailure};
use crate::policy::{
    Choice, Decision, Judgement, Policy, choose, further, grounded, grounding, guess, unsaid,
};

use super::ServeError;
use super::ahead::Ahead;
use super::answer_only::{after_decline, switch_to_answer};
use super::core::{Core, Trace};
use super::event::{FinishReason, ServeEvent, ToolCallOut};
use super::fit::{Fitting, too_long};
use super::live::{Sent, answer_may_stream};
use super::read::{Read, Refusal, read};
use super::request::Ask;
use super::seat::{Asking, Stop};
use super::{conversation, grammar, reask};
use crate::llm::{RepeatedBlock, TurnRequest, Usage};
use crate::protocol::{STOP_SEQUENCES, render_observation};
use crate::shown::Outside;

/// The turn budget when the client sets none (as `tagloop run`'s default).
const DEFAULT_MAX_TOKENS: u32 = 1024;
/// Most bytes of a correction shown to the model.
const CORRECTION_LIMIT: usize = 4096;

/// The stop strings of a turn: tagloop's own; when calls may come in parallel, `</action>` is
/// left out (the model writes one closed action after another and stops, or is stopped at the
/// `<observation>` it would invent; the grammar allows no more than the limit).
fn stops(ask: &Ask) -> Vec<String> {
    let parallel = ask.parallel && conversation::allows_calls(ask);
    STOP_SEQUENCES
        .iter()
        .filter(|s| !(parallel && **s == "</action>"))
        .map(|s| s.to_string())
        .collect()
}

/// A new call id, `call_` and a random (v4) UUID's 32 hex digits, for a client to match its
/// `tool` messages; no state is shared between requests.
pub(crate) fn call_id() -> String {
    format!("call_{}", uuid::Uuid::new_v4().simple())
}

/// Answer `ask`: the events go to `emit` once the answer is decided. The trace is filled in
/// whatever happens.
pub(crate) async fn answer(
    core: &Core<'_>,
    ask: &Ask,
    emit: &mut (dyn FnMut(ServeEvent) + Send),
    trace: &mut Trace,
) -> Result<(), ServeError> {
    let role = conversation::role(ask)?;
    // What the decision room's rules see of the request (`crate::policy`).
    let seen = ask.view();
    let mut history = conversation::history(ask, &role, (core.api, core.thought), core.templates)?;
    core.model.prepare().await;
    let grammar = if core.model.wants_grammar() {
        grammar::for_request(ask, core.api, core.thought)
    } else {
        None
    };
    let asked = ask.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let mut fitting = Fitting::new(core.model, asked);
    let on = |policy| core.policies.on(policy);
    let mut request = TurnRequest {
        stop: stops(ask),
        temperature: ask.temperature,
        max_tokens: Some(asked),
        seed: ask.seed,
        grammar,
        cut_counting: on(Policy::Counting) && grounded::may_cut_counting(&seen),
        keep_repetitions: !on(Policy::Repeat),
        ..TurnRequest::default()
    };
    if ask.parallel && conversation::allows_calls(ask) && on(Policy::Further) {
        // A turn that writes a call it already wrote ends there (read.rs drops copies anyway),
        // and so does one that goes on to a call the question did not ask for: values the
        // conversation never gave (policy/grounded.rs), or nothing beyond the calls before it
        // (policy/further.rs).
        request.end_at_repeated_block =
            Some(RepeatedBlock::new("<action>", "</action>").with_later(further::check(&seen)));
    }
    let mut last_reason = String::new();
    let names: Vec<&str> = ask.tools.iter().map(|t| t.name.as_str()).collect();
    // A text answer the question's words may send back for a call (policy/choose.rs) is held.
    let may_stream = answer_may_stream(ask, &role)
        && !(request.grammar.is_some() && on(Policy::Choose) && choose::reasks_answers(&seen));
    // Under `auto` a turn that cannot give a usable call may still answer: after a turn that
    // only repeated answered calls, after a refused turn written again word for word (at
    // temperature 0 the next repair would write it a third time), and once the repair budget is
    // spent, the turn is asked for an answer only (one more request at most).
    let may_fall_back = ask.choice == Choice::Auto && conversation::allows_calls(ask);
    let mut answer_only = false;
    // The guess that judges a first call is sent beside the first turn (ahead.rs).
    let mut ahead = Ahead::start(
        core.model,
        core.api,
        core.guess_timeout,
        ask,
        may_fall_back && on(Policy::Guess),
    );
    if ahead.is_some() {
        trace.requests += 1;
    }
    let mut left = core.repairs + 1;
    let mut refused_before: Option<String> = None;
    // A turn cut inside its thought is closed there and continued once a request (the turn
    // engine's rule, `agent/turn/`; completions, or a chat server that continues an assistant
    // message). After declined calls the next turn may begin in the runtime's words (`start`).
    let can_continue = turn::can_continue(core.model, core.api);
    let mut continued = false;
    let mut start = String::new();
    for attempt in 0.. {
        if left == 0 {
            break;
        }
        left -= 1;
        let asked_answer_only = answer_only;
        let rules = Rules {
            max_continuations: 0,
            close_thought: if continued {
                CloseThought::Never
            } else {
                CloseThought::Any
            },
        };
        let mut seat = Asking {
            core,
            ask,
            history: &history,
            request: &mut request,
            fitting: &mut fitting,
            trace,
            ahead: ahead.as_mut().filter(|_| !answer_only),
            may_stream,
            names: &names,
            emit,
            answer_only,
            sent: None,
            closed_thought: false,
        };
        let asked = turn::ask_turn(&mut seat, rules, std::mem::take(&mut start), None).await;
        let sent = seat.sent.take();
        let closed_thought = seat.closed_thought;
        if closed_thought {
            // The continuation is a request of its own: it costs the budget one, when one is
            // left (the next correction may still come), whatever the turn then became.
            continued = true;
            left = left.saturating_sub(1);
        }
        let turn = match asked {
            Ok(turn) => turn,
            Err(TurnFailure::Stopped(Stop::Declined(judged))) => {
                // No declared tool is about the question: whatever call the turn was writing
                // would be declined, so it was dropped unread (its usage is not known).
                trace.decisions.push(judged);
                answer_only = true;
                left = left.max(2);
                switch_to_answer((core.api, core.thought), ask, &mut request);
                start = after_decline((core.api, core.thought), ask, &mut request, can_continue);
                continue;
            }
            Err(TurnFailure::Stopped(Stop::Failed(e))) => return Err(e),
            Err(TurnFailure::Context { .. }) => {
                return Err(too_long(
                    "the upstream refused the prompt as longer than its context window again, after fitting",
                ));
            }
            Err(TurnFailure::Model(e)) => {
                tracing::warn!(error = %Outside(&e), "the upstream failed");
                if let Some(late) = ServeError::out_of_time(&e) {
                    return Err(late);
                }
                return Err(ServeError::Upstream {
                    reason: client_reason(&e),
                });
            }
        };
        let text = turn.text;
        // A refusal may quote the turn, which may hold the upstream key: redacted before it is
        // logged, kept, or becomes a 502's message.
        let read = |text: &str| {
            read(
                text,
                &turn.finish,
                ask,
                &role,
                answer_only,
                core.thought,
                core.policies,
            )
            .map_err(|mut refusal| {
                refusal.message = core.redactor.redact_string(refusal.message);
                refusal
            })
        };
        if let Some(sent) = sent {
            let read = read(&text);
            trace.turns.push((text, None));
            finish_committed(read, &sent, turn.reasoning, trace.usage, emit);
            return Ok(());
        }
        let mut read = read(&text);
        let mut text = text;
        // The reasoning sent with the answer is its turn's: a re-ask's replaces the first's.
        let mut reasoning = turn.reasoning.clone();
        if !closed_thought
            && !answer_only
            && request.grammar.is_some()
            && on(Policy::Choose)
            && let Ok(r) = &read
            && let Some(better) = choose::better_tool(&seen, &r.decision)
        {
            // One call of a tool the question's words name less than another's: asked once
            // more for that other tool alone (policy/choose.rs, serve/reask.rs); the new call is judged as any.
            let (model, api) = (core.model, (core.api, core.thought, core.policies));
            let (requests, usage) = (&mut trace.requests, &mut trace.usage);
            let again = reask::reask(
                model, api, &history, &request, ask, &role, &better, requests, usage,
            );
            match again.await {
                reask::Reasked::Call(new_text, new_read, new_reasoning) => {
                    trace.turns.push((text, Some(better.why)));
                    text = new_text;
                    read = Ok(new_read);
                    reasoning = new_reasoning;
                }
                // Recorded before the turn whose call stands, which is recorded last as ever.
                reask::Reasked::Unusable(failed, why) => trace.turns.push((
                    failed,
                    Some(format!(
                        "(not used: {}; {why}; the next turn's call stands)",
                        better.why
                    )),
                )),
                reask::Reasked::Nothing => {}
            }
        }
        let mut declined = match &read {
            Ok(r) if may_fall_back && !answer_only && on(Policy::Grounding) => {
                grounding::decline(&seen, &r.decision).inspect(|why| {
                    let judged = Judgement::ungrounded(&r.decision, why);
                    trace.decisions.push(judged);
                })
            }
            _ => None,
        };
        if declined.is_none()
            && may_fall_back
            && !answer_only
            && let Ok(r) = &read
            && let Some(ahead) = ahead.as_mut()
            && let Some(called) = guess::judged(&seen, &r.decision)
        {
            // A first call the grounding keeps: is its tool about what the question asks?
            // (policy/guess.rs: one short request of the question alone, sent with the first turn.)
            // Kept as unfinished until it answers: the request's deadline may end it.
            trace.decisions.push(Judgement::unfinished(&called));
            let judged = ahead.judge(&called, &mut trace.usage).await?;
            if judged.declined {
                declined = Some(judged.why.clone());
            }
            trace.decisions.pop();
            trace.decisions.push(judged);
        }
        if let Some(why) = declined {
            // Calls the question did not ask for (policy/grounding.rs): the same prompt is asked again
            // for an answer only; the declined turn stays out of the history.
            tracing::debug!(reason = %Outside(&why), "the turn's calls are declined");
            trace.turns.push((text, Some(why)));
            answer_only = true;
            // Room for one correction, should an upstream without a grammar call again.
            left = left.max(2);
            switch_to_answer((core.api, core.thought), ask, &mut request);
            // The answer's thought begins in the runtime's words (asked again, the model would
            // write the one that led to the calls): under the grammar, or as the start of the
            // turn where the upstream continues one.
            start = after_decline((core.api, core.thought), ask, &mut request, can_continue);
            continue;
        }
        match read {
            Ok(mut read) => {
                trace.turns.push((text, None));
                if on(Policy::UnsaidOptional) {
                    let left_out = unsaid::leave_out(&seen, &mut read.decision);
                    trace.decisions.extend(left_out);
                }
                emit_answer(read, reasoning, trace.usage, emit);
                return Ok(());
            }
            Err(refusal) => {
                tracing::debug!(attempt, reason = %Outside(&refusal.message), "the upstream's turn is corrected");
                let again = refused_before.as_deref() == Some(text.as_str());
                let mut message = refusal.message.clone();
                if may_fall_back && !answer_only && (refusal.answer_next || again || left == 0) {
                    answer_only = true;
                    left = left.max(1);
                    switch_to_answer((core.api, core.thought), ask, &mut request);
                    if !refusal.answer_next {
                        message.push_str(ANSWER_NOW);
                    }
                }
                trace.turns.push((text.clone(), Some(message.clone())));
                history.push_turn(&refusal.kept);
                history.push_user(&render_observation(&message, CORRECTION_LIMIT));
                refused_before = Some(text);
                // The client's 502 names what was wrong with the last call, not that the
                // fallback's turn called again.
                if !asked_answer_only || last_reason.is_empty() {
                    last_reason = refusal.message;
                }
            }
        }
    }
    Err(ServeError::Upstream {
        reason: format!(
            "the upstream gave no usable turn in {} request{}; the last was refused: {last_reason}",
            trace.requests,
            if trace.requests == 1 { "" } else { "s" }
        ),
    })
}

/// Said after a correction when the next turn may only answer.
const ANSWER_NOW: &str = " No tool may be called in the next turn: give your final answer now.";

/// The rest of an answer whose turn was committed while it streamed (`sent` is out already):
/// what the whole reading adds to the reasoning and to the text, the server's separate
/// reasoning (known only now) after the turn's own, then `Done`.
///
/// A committed turn is not corrected: the client has part of it. The one refusal a committed
/// plain answer can still get is a repetition cut by the degeneration guard; the answer then
/// ends as sent, with `finish_reason: "length"`.
fn finish_committed(
    read: Result<Read, Refusal>,
    sent: &Sent,
    server_reasoning: Option<String>,
    usage: Usage,
    emit: &mut (dyn FnMut(ServeEvent) + Send),
) {
    let (thought, answer) = match read {
        Ok(Read {
            thought,
            decision: Decision::Answer { text, cut },
        }) => (thought.unwrap_or_default(), Some((text, cut))),
        Ok(Read { thought, .. }) => (thought.unwrap_or_default(), None),
        Err(refusal) => {
            tracing::warn!(reason = %Outside(&refusal.message), "a committed answer's whole turn was refused; it ends as sent");
            (sent.reasoning.clone(), None)
        }
    };
    let mut reasoning = rest_of(&thought, &sent.reasoning, "reasoning").to_string();
    if let Some(r) = server_reasoning.filter(|r| !r.trim().is_empty()) {
        if !(sent.reasoning.is_empty() && reasoning.is_empty()) {
            reasoning.push_str("\n\n");
        }
        reasoning.push_str(&r);
    }
    if !reasoning.is_empty() {
        emit(ServeEvent::Reasoning(reasoning));
    }
    let finish_reason = match answer {
        Some((text, cut)) => {
            let more = rest_of(&text, &sent.content, "answer");
            if !more.is_empty() {
                emit(ServeEvent::Content(more.to_string()));
            }
            if cut {
                FinishReason::Length
            } else {
                FinishReason::Stop
            }
        }
        None => FinishReason::Length,
    };
    emit(ServeEvent::Done {
        finish_reason,
        usage,
    });
}

/// What `whole` adds to `sent`. `live.rs` sends only prefixes of the whole reading; should that
/// ever fail, nothing more is sent (the client keeps a consistent text) and it is logged.
fn rest_of<'w>(whole: &'w str, sent: &str, what: &str) -> &'w str {
    whole.strip_prefix(sent).unwrap_or_else(|| {
        tracing::warn!(
            what,
            "the streamed text is not a prefix of the whole turn's; nothing more is sent"
        );
        ""
    })
}

/// The events of a decided answer.
pub(crate) fn emit_answer(
    read: super::read::Read,
    server_reasoning: Option<String>,
    usage: Usage,
    emit: &mut (dyn FnMut(ServeEvent) + Send),
) {
    let reasoning = match (
        server_reasoning.filter(|r| !r.trim().is_empty()),
        read.thought,
    ) {
        (Some(r), Some(t)) => Some(format!("{r}\n\n{t}")),
        (r, t) => r.or(t),
    };
    if let Some(r) = reasoning {
        emit(ServeEvent::Reasoning(r));
    }
    let finish_reason = match read.decision {
        Decision::Calls(calls) => {
            for (index, (name, args)) in calls.into_iter().enumerate() {
                emit(ServeEvent::ToolCall(ToolCallOut {
                    index: index as u32,
                    id: call_id(),
                    name,
                    arguments: serde_json::Value::Object(args).to_string(),
                }));
            }
            FinishReason::ToolCalls
        }
        Decision::Answer { text, cut } => {
            emit(ServeEvent::Content(text));
            if cut {
                FinishReason::Length
            } else {
                FinishReason::Stop
            }
        }
    };
    emit(ServeEvent::Done {
        finish_reason,
        usage,
    });
}

/// What a client is told of an upstream failure: what kind of failure, never the upstream's
/// address or the transport's words (the log line has those).
pub(crate) fn client_reason(e: &crate::llm::LlmError) -> String {
    if let crate::llm::LlmError::GaveUp { last, .. } = e {
        return client_reason(last);
    }
    if let Some(o) = e.context_overflow() {
        return match (o.requested, o.window) {
            (Some(r), Some(w)) => format!(
                "the conversation does not fit the upstream model's context window ({r} tokens asked of {w})"
            ),
            _ => "the conversation does not fit the upstream model's context window".into(),
        };
    }
    match e.status() {
        Some(status) => format!("the upstream failed: it answered HTTP {status}"),
        None if e.is_retryable() => {
            "the upstream failed: it could not be reached, or did not answer in time".into()
        }
        None => "the upstream failed: its answer could not be used".into(),
    }
}

#[cfg(test)]
#[path = "answer_tests.rs"]
mod tests;
