//! Think: one model turn, continued while a stop string fired where it cannot have ended it,
//! or once when a constrained turn was cut inside its thought.
//!
//! A turn is one request, unless the server stopped inside an open string of the action or an
//! open `<think>` block (see [`protocol::stopped_inside`]); then, where the API can continue an
//! unfinished turn (completions, or chat with prefill), the stop string is put back and the
//! model is asked to go on, up to `max_continuations` times. A constrained turn that the
//! degeneration guard or its budget cut inside its thought is closed there and continued once
//! with the decision's grammar (`thought_cut.rs`). A chat server that refuses to continue (a 400
//! to the prefill) ends the turn where it was, as if it had never been continued.
//!
//! Every request is fitted into the model's context window first (`context/`); a server that
//! still refuses one as too long gets it once more, fitted harder.

use std::time::Instant;

use tracing::debug;

use crate::llm::{Finish, LlmError, Notice, NoticeKind, TurnRequest, TurnResult};
use crate::protocol::{self, Inside, STOP_SEQUENCES};

use super::Api;
use super::context::{Fit, PreparedRequest, prompt_bytes};
use super::events::Event;
use super::plan::TurnPlan;
use super::run::Run;
use super::thought_cut::thought_end;

/// What one model turn gave, continuations joined.
pub(crate) struct ModelTurn {
    /// The turn as the reader sees it.
    pub(crate) text: String,
    /// Why the last request of the turn ended.
    pub(crate) finish: Finish,
    /// Where the action's body starts when the turn was continued inside one of its strings: the
    /// body then runs to the end of the turn (the stop strings inside it are content).
    pub(crate) action_start: Option<usize>,
    /// The turn carried reasoning (separate reasoning from the server, or a `<think>` block):
    /// the model reasons first.
    pub(crate) shows_reasoning: bool,
}

/// Why a turn could not be had.
#[derive(Debug)]
pub(crate) enum TurnFailure {
    /// The model failed (after the client's retries).
    Model(LlmError),
    /// The prompt does not fit the context window, even fitted; `final_fits` when a
    /// final-answer-only turn still would.
    Context { final_fits: bool, why: String },
}

impl Run<'_> {
    /// One model turn, with its continuations, asked as `plan` says; `first` is its first
    /// request, already fitted.
    pub(super) async fn think(
        &mut self,
        plan: TurnPlan,
        first: PreparedRequest,
    ) -> Result<ModelTurn, TurnFailure> {
        let agent = self.agent;
        let can_continue = agent.config.api == Api::Completions || agent.model.supports_prefill();
        let mut generated = String::new();
        let mut continuations = 0;
        let mut action_start: Option<usize> = None;
        let mut reasoned = false;
        let mut next = Some(first);
        let mut refused = false;
        // The turn was continued after its thought (once per turn); the next request is that
        // continuation, asked under the decision's grammar.
        let (mut decided, mut decide_next) = (false, false);
        // Before the last continuation: the turn's length, how it had ended, and `action_start`.
        let mut before: Option<(usize, Finish, Option<usize>)> = None;
        self.progress.llm_calls += 1;
        loop {
            let send = match next.take() {
                Some(send) => send,
                None => match self.fit_request(&generated, plan.final_only, None).await {
                    Fit::Ready(request) => request,
                    // No room to go on: the turn is what it is, cut as by its token limit.
                    Fit::Full { .. } => {
                        return Ok(ModelTurn {
                            text: self.history.turn_text(&generated),
                            finish: Finish::Length,
                            action_start,
                            shows_reasoning: reasoned,
                        });
                    }
                },
            };
            // A fresh turn that needed no fitting borrows the history and gives it back below,
            // whatever the result (nothing else reads it meanwhile; a cancelled turn drops the
            // whole run).
            let lent = generated.is_empty() && send.prompt.is_none();
            let prompt = match send.prompt {
                Some(fitted) => fitted,
                None if lent => self.history.lend(),
                None => self.history.prompt_with_partial(&generated),
            };
            let sent_bytes = prompt_bytes(&prompt);
            let mut stop = std::mem::take(&mut self.stops);
            if stop.is_empty() {
                stop = STOP_SEQUENCES.iter().map(|s| s.to_string()).collect();
            }
            let (notices, kept) = self.notice_sink();
            // A continuation starts inside the turn: the grammar of a whole turn does not fit.
            // Right after the loop guard refused a repeated call, the turn gets the last
            // turn's grammar (the model was just shown the result it keeps asking for).
            let last = plan.final_only || plan.after_refused_call;
            let grammar = if generated.is_empty() {
                agent.grammars().pick(last, plan.reasoning)
            } else if std::mem::take(&mut decide_next) {
                agent.grammars().pick_decision(last)
            } else {
                None
            };
            // The whole-turn grammar holds the thought to one line: a sentence said three times
            // there is a loop (see `RepeatGuard`). Reasoning in `<think>` stays free.
            let strict_repeats_until =
                if generated.is_empty() && grammar.is_some() && !plan.reasoning {
                    protocol::LAZY_TRIGGERS
                        .iter()
                        .map(|t| t.to_string())
                        .collect()
                } else {
                    Vec::new()
                };
            let request = TurnRequest {
                prompt,
                stop,
                temperature: agent.config.temperature,
                max_tokens: send.max_tokens,
                seed: agent.config.seed,
                keep_repetitions: agent.config.keep_repetitions,
                strict_repeats_until,
                end_at_repeated_block: None,
                extra: agent.config.extra.clone(),
                grammar,
                notices: Some(notices),
            };
            let sink = self.options.events.clone();
            let mut on_delta = |d: &str| {
                if let Some(sink) = &sink {
                    sink(&Event::TextDelta {
                        text: d.to_string(),
                    });
                }
            };
            let started = Instant::now();
            let result = agent.model.turn(&request, &mut on_delta).await;
            let TurnRequest { prompt, stop, .. } = request;
            if lent {
                self.history.give_back(prompt);
            }
            self.stops = stop;
            self.record_notices(&kept);
            let result = match result {
                Ok(result) => result,
                Err(e) => match e.context_overflow() {
                    Some(overflow) if agent.config.context.fits() && !refused => {
                        refused = true;
                        self.notice(Notice::new(
                            NoticeKind::Retry,
                            format!("the server refused the prompt as longer than its context window: fitting it harder and asking once more ({e})"),
                        ));
                        match self
                            .fit_request(&generated, plan.final_only, Some(overflow))
                            .await
                        {
                            Fit::Ready(request) => {
                                next = Some(request);
                                continue;
                            }
                            Fit::Full { final_fits, why } => {
                                return Err(TurnFailure::Context { final_fits, why });
                            }
                        }
                    }
                    Some(_) if agent.config.context.fits() => {
                        return Err(TurnFailure::Context {
                            final_fits: false,
                            why: format!(
                                "the server refused the prompt as longer than its context window again, after fitting: {e}"
                            ),
                        });
                    }
                    // A chat server that will not continue the turn (the client turned prefill
                    // off for good): the turn ends where it was before the continuation.
                    _ => match before.take() {
                        Some((len, finish, start))
                            if agent.config.api == Api::Chat && !agent.model.supports_prefill() =>
                        {
                            generated.truncate(len);
                            return Ok(ModelTurn {
                                text: self.history.turn_text(&generated),
                                finish,
                                action_start: start,
                                shows_reasoning: reasoned,
                            });
                        }
                        _ => return Err(TurnFailure::Model(e)),
                    },
                },
            };
            self.context
                .estimator
                .observe(sent_bytes, result.usage.prompt_tokens);
            self.requests += 1;
            self.progress.usage.add(result.usage);
            generated.push_str(&result.text);
            self.emit(Event::TurnFinished {
                text: result.text.clone(),
                finish: result.finish.clone(),
                usage: result.usage,
                elapsed_ms: started.elapsed().as_millis() as u64,
                constraint: result.constraint,
            });
            if result.finish == Finish::Repeated {
                self.notice(Notice::new(
                    NoticeKind::RepetitionCut,
                    "the turn kept repeating itself: cut after the first repetition",
                ));
            }
            reasoned |= shows_reasoning(&result);
            let text = self.history.turn_text(&generated);
            // What the server actually sent (a grammar it refused is not sent again).
            if result.constraint.is_constrained()
                && !decided
                && can_continue
                && let Some(ending) = thought_end(&text, &result.finish)
            {
                self.notice(Notice::new(
                    NoticeKind::ThoughtCut,
                    format!("the turn never left its thought: closed there with {ending:?}, the action or the answer is asked for alone"),
                ));
                before = Some((generated.len(), result.finish.clone(), action_start));
                let kept = generated.trim_end().len();
                generated.truncate(kept);
                generated.push_str(ending);
                on_delta(ending);
                (decided, decide_next) = (true, true);
                continue;
            }
            if let Finish::Stop(stop) = &result.finish
                && can_continue
                && continuations < agent.config.max_continuations
                && let Some(inside) = protocol::stopped_inside(&text, action_start)
            {
                debug!(stop = %stop, "stop string inside an open string or <think>: continuing the turn");
                before = Some((generated.len(), result.finish.clone(), action_start));
                if let Inside::ActionString(start) = inside {
                    action_start = Some(start);
                }
                generated.push_str(stop);
                continuations += 1;
                continue;
            }
            return Ok(ModelTurn {
                text,
                finish: result.finish,
                action_start,
                shows_reasoning: reasoned,
            });
        }
    }
}

/// Whether a turn carried reasoning: separate reasoning from the server, or a `<think>` block.
fn shows_reasoning(result: &TurnResult) -> bool {
    let separate = result
        .reasoning
        .as_deref()
        .is_some_and(|r| !r.trim().is_empty());
    let head = result.text.trim_start().as_bytes();
    separate || head.len() >= 7 && head[..7].eq_ignore_ascii_case(b"<think>")
}
