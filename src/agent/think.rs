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
//!
//! What lives for one turn only (the text so far, the continuations, the retry) is the
//! [`TurnInProgress`] of `turn.rs`, which also decides how the turn goes on; this file is the
//! run's side: asking the model with the run's history, stop strings and notices, and telling
//! the caller.

use std::time::Instant;

use crate::llm::{Finish, LlmError, Notice, NoticeKind, TurnRequest, TurnResult};
use crate::policy::Policy;
use crate::protocol::STOP_SEQUENCES;

use super::Api;
use super::context::{Fit, PreparedRequest, prompt_bytes};
use super::events::Event;
use super::plan::TurnPlan;
use super::run::Run;
use super::turn::{AfterAnswer, ModelTurn, TurnFailure, TurnInProgress};

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
        let mut turn = TurnInProgress::new(plan, can_continue, first);
        self.progress.llm_calls += 1;
        loop {
            let request = match turn.take_prepared() {
                Some(request) => request,
                None => match self
                    .fit_request(turn.partial(), plan.final_only, None)
                    .await
                {
                    Fit::Ready(request) => request,
                    Fit::Full { .. } => return Ok(turn.cut(&self.history)),
                },
            };
            let result = match self.ask(&mut turn, request).await {
                Ok(result) => result,
                Err(e) => match self.after_error(&mut turn, e).await? {
                    Some(ended) => return Ok(ended),
                    None => continue,
                },
            };
            match turn.read(result, &self.history, agent.config.max_continuations) {
                AfterAnswer::ThoughtClosed(ending) => {
                    self.recorder.notice(Notice::new(
                        NoticeKind::ThoughtCut,
                        format!("the turn never left its thought: closed there with {ending:?}, the action or the answer is asked for alone"),
                    ));
                    if let Some(sink) = self.recorder.sink() {
                        sink(&Event::TextDelta {
                            text: ending.to_string(),
                        });
                    }
                }
                AfterAnswer::Continued => {}
                AfterAnswer::Done(model_turn) => return Ok(model_turn),
            }
        }
    }

    /// Ask the model for the next part of `turn` (`request`, fitted), streaming its text to the
    /// caller, and count what it answered.
    async fn ask(
        &mut self,
        turn: &mut TurnInProgress,
        request: PreparedRequest,
    ) -> Result<TurnResult, LlmError> {
        let agent = self.agent;
        // A fresh turn that needed no fitting borrows the history and gives it back below,
        // whatever the result (nothing else reads it meanwhile; a cancelled turn drops the
        // whole run).
        let lent = turn.partial().is_empty() && request.prompt.is_none();
        let grammar = turn.grammar(agent.grammars());
        let policies = agent.config.policies;
        let strict_arguments = (grammar.as_ref())
            .filter(|_| policies.on(Policy::Given))
            .map(|_| self.memory.said.given());
        let prompt = match request.prompt {
            Some(fitted) => fitted,
            None if lent => self.history.lend(),
            None => self.history.prompt_with_partial(turn.partial()),
        };
        let sent_bytes = prompt_bytes(&prompt);
        let mut stop = std::mem::take(&mut self.stops);
        if stop.is_empty() {
            stop = STOP_SEQUENCES.iter().map(|s| s.to_string()).collect();
        }
        let (notices, kept) = self.recorder.notice_sink();
        let strict_repeats_until =
            turn.strict_repeats_until(grammar.is_some(), agent.role.output_schema().is_none());
        let request = TurnRequest {
            prompt,
            stop,
            temperature: agent.config.temperature,
            max_tokens: request.max_tokens,
            seed: agent.config.seed,
            keep_repetitions: agent.config.keep_repetitions || !policies.on(Policy::Repeat),
            strict_repeats_until,
            cut_counting: policies.on(Policy::Counting),
            strict_arguments,
            own_words: (grammar.as_ref())
                .filter(|_| policies.on(Policy::Echo))
                .and(self.memory.said.notes()),
            end_at_repeated_block: None,
            extra: agent.config.extra.clone(),
            grammar,
            notices: Some(notices),
        };
        let sink = self.recorder.sink().cloned();
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
        self.recorder.record_notices(&kept);
        let result = result?;
        self.context
            .estimator
            .observe(sent_bytes, result.usage.prompt_tokens);
        self.requests += 1;
        self.progress.usage.add(result.usage);
        self.emit(Event::TurnFinished {
            text: result.text.clone(),
            finish: result.finish.clone(),
            usage: result.usage,
            elapsed_ms: started.elapsed().as_millis() as u64,
            constraint: result.constraint,
        });
        if result.finish == Finish::Repeated {
            self.recorder.notice(Notice::new(
                NoticeKind::RepetitionCut,
                "the turn kept repeating itself: cut after the first repetition",
            ));
        }
        Ok(result)
    }

    /// The model failed: ask once more fitted harder when the server refused the prompt as too
    /// long (`Ok(None)`), end the turn where it was before a continuation a chat server would
    /// not make (`Ok(Some(..))`), or fail.
    async fn after_error(
        &mut self,
        turn: &mut TurnInProgress,
        e: LlmError,
    ) -> Result<Option<ModelTurn>, TurnFailure> {
        let agent = self.agent;
        let fits = agent.config.context.fits();
        match e.context_overflow() {
            Some(overflow) if fits && !turn.retried_fitted() => {
                self.recorder.notice(Notice::new(
                    NoticeKind::Retry,
                    format!("the server refused the prompt as longer than its context window: fitting it harder and asking once more ({e})"),
                ));
                let final_only = turn.plan.final_only;
                match self
                    .fit_request(turn.partial(), final_only, Some(overflow))
                    .await
                {
                    Fit::Ready(request) => {
                        turn.ask_next(request);
                        Ok(None)
                    }
                    Fit::Full { final_fits, why } => Err(TurnFailure::Context { final_fits, why }),
                }
            }
            Some(_) if fits => Err(TurnFailure::Context {
                final_fits: false,
                why: format!(
                    "the server refused the prompt as longer than its context window again, after fitting: {e}"
                ),
            }),
            // A chat server that will not continue the turn (the client turned prefill off for
            // good): the turn ends where it was before the continuation.
            _ => {
                let chat = agent.config.api == Api::Chat && !agent.model.supports_prefill();
                match turn.end_before_continuation(chat, &self.history) {
                    Some(ended) => Ok(Some(ended)),
                    None => Err(TurnFailure::Model(e)),
                }
            }
        }
    }
}
