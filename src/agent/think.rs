//! Think: one model turn of a run, asked through the turn engine (`turn/`), this file being
//! the run's seat: how a request is fitted (the run's history, `context/`), which grammar each
//! stage of a turn gets (`grammars/`, as the [`TurnPlan`] says), and how the model is asked
//! (the run's stop strings, guards and notices, the text streamed to the caller).
//!
//! The engine continues the turn where it must (a stop string inside an open string or
//! `<think>` block, up to `max_continuations` times; a constrained turn cut inside its thought,
//! closed there and continued once with the decision's grammar) and asks once more, fitted
//! harder, when the server refuses a prompt as too long.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use crate::llm::{
    ContextOverflow, Finish, LlmError, Model, Notice, NoticeKind, TurnGrammar, TurnRequest,
    TurnResult,
};
use crate::policy::{Policy, QuestionNames};
use crate::protocol::{self, STOP_SEQUENCES};

use super::Api;
use super::context::{Fit, PreparedRequest, prompt_bytes};
use super::events::Event;
use super::grammars::Grammars;
use super::plan::TurnPlan;
use super::run::Run;
use super::turn::{
    self, CloseThought, Fitted, ModelTurn, Rules, Seat, Stage, TurnFailure, Unanswered,
};

/// A run asking one turn: the engine's seat.
struct Thinking<'r, 'a> {
    run: &'r mut Run<'a>,
    plan: TurnPlan,
}

impl Run<'_> {
    /// One model turn, with its continuations, asked as `plan` says; `first` is its first
    /// request, already fitted.
    pub(super) async fn think(
        &mut self,
        plan: TurnPlan,
        first: PreparedRequest,
    ) -> Result<ModelTurn, TurnFailure<Infallible>> {
        let rules = Rules {
            max_continuations: self.agent.config.max_continuations,
            close_thought: CloseThought::Constrained,
        };
        self.progress.llm_calls += 1;
        let mut seat = Thinking { run: self, plan };
        turn::ask_turn(&mut seat, rules, String::new(), Some(first)).await
    }
}

impl Seat for Thinking<'_, '_> {
    type Prepared = PreparedRequest;
    type Stop = Infallible;

    fn upstream(&self) -> (&dyn Model, Api) {
        let agent = self.run.agent;
        (agent.model.as_ref(), agent.config.api)
    }

    fn fits(&self) -> bool {
        self.run.agent.config.context.fits()
    }

    async fn fit(
        &mut self,
        partial: &str,
        overflow: Option<ContextOverflow>,
    ) -> Result<Fitted<PreparedRequest>, Infallible> {
        let final_only = self.plan.final_only;
        Ok(
            match self.run.fit_request(partial, final_only, overflow).await {
                Fit::Ready(request) => Fitted::Ready(request),
                Fit::Full { final_fits, why } => Fitted::Full { final_fits, why },
            },
        )
    }

    async fn ask(
        &mut self,
        request: PreparedRequest,
        stage: Stage,
        partial: &str,
    ) -> Result<TurnResult, Unanswered<Infallible>> {
        self.run
            .ask(self.plan, request, stage, partial)
            .await
            .map_err(Unanswered::Failed)
    }

    fn turn_text(&self, generated: &str) -> String {
        self.run.history.turn_text(generated)
    }

    fn tool_names(&self) -> Vec<&str> {
        self.run.agent.tools.names()
    }

    fn refitting(&mut self, error: &LlmError) {
        self.run.recorder.notice(Notice::new(
            NoticeKind::Retry,
            format!("the server refused the prompt as longer than its context window: fitting it harder and asking once more ({error})"),
        ));
    }

    fn thought_closed(&mut self, _cut: &str, ending: &'static str) {
        self.run.recorder.notice(Notice::new(
            NoticeKind::ThoughtCut,
            format!("the turn never left its thought: closed there with {ending:?}, the action or the answer is asked for alone"),
        ));
        if let Some(sink) = self.run.recorder.sink() {
            sink(&Event::TextDelta {
                text: ending.to_string(),
            });
        }
    }
}

impl Run<'_> {
    /// Ask the model for `stage` of a turn that so far is `partial` (`request`, fitted),
    /// streaming its text to the caller, and count what it answered.
    async fn ask(
        &mut self,
        plan: TurnPlan,
        request: PreparedRequest,
        stage: Stage,
        partial: &str,
    ) -> Result<TurnResult, LlmError> {
        let agent = self.agent;
        // A fresh turn that needed no fitting borrows the history and gives it back below,
        // whatever the result (nothing else reads it meanwhile; a cancelled turn drops the
        // whole run).
        let lent = partial.is_empty() && request.prompt.is_none();
        let grammar = grammar(agent.grammars(), plan, stage, &self.memory.named);
        let policies = agent.config.policies;
        let prompt = match request.prompt {
            Some(fitted) => fitted,
            None if lent => self.history.lend(),
            None => self.history.prompt_with_partial(partial),
        };
        let sent_bytes = prompt_bytes(&prompt);
        let mut stop = std::mem::take(&mut self.stops);
        if stop.is_empty() {
            stop = STOP_SEQUENCES.iter().map(|s| s.to_string()).collect();
        }
        let (notices, kept) = self.recorder.notice_sink();
        let free_answer = agent.role.output_schema().is_none();
        let strict_repeats_until =
            strict_repeats_until(plan, stage, grammar.is_some(), free_answer);
        let request = TurnRequest {
            prompt,
            stop,
            temperature: agent.config.temperature,
            max_tokens: request.max_tokens,
            seed: agent.config.seed,
            keep_repetitions: agent.config.keep_repetitions || !policies.on(Policy::Repeat),
            strict_repeats_until,
            cut_counting: policies.on(Policy::Counting),
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
}

/// The grammar of a request asking for `stage` of a turn. A continuation starts inside the
/// turn: the grammar of a whole turn does not fit. Right after the loop guard refused a
/// repeated call, the turn gets the last turn's grammar (the model was just shown the result it
/// keeps asking for); right after the decision step declined its call, the answer's, its
/// thought begun by the runtime (the plain answer-only grammar should that one not be had).
fn grammar(
    grammars: &Grammars,
    plan: TurnPlan,
    stage: Stage,
    named: &QuestionNames,
) -> Option<Arc<TurnGrammar>> {
    let last = plan.final_only || plan.after_refused_call;
    match stage {
        Stage::Whole if plan.after_decline => grammars
            .pick_declined(plan.reasoning, named.names())
            .or_else(|| grammars.pick(true, plan.reasoning, named.names())),
        Stage::Whole => grammars.pick(last, plan.reasoning, named.names()),
        Stage::Decision => grammars.pick_decision(last, named.names()),
        Stage::Continuation => None,
    }
}

/// The whole-turn grammar holds the thought to one line: a sentence said three times there is
/// a loop (see `RepeatGuard`). A free-text final answer is held to the same: small models that
/// do not stop after their answer say it again and again (SmolLM2: "You can't do it.\n\n"
/// until the ordinary guard cut it at 150 tokens), so the strict guard lasts until an
/// `<action>` (whose arguments may repeat legitimately) and through the answer, in a whole turn
/// or in the decision asked for alone after a cut thought (`free_answer`: the role has no
/// output schema, whose JSON is left to the ordinary guard). Reasoning in `<think>` stays free.
fn strict_repeats_until(
    plan: TurnPlan,
    stage: Stage,
    constrained: bool,
    free_answer: bool,
) -> Vec<String> {
    if !constrained || plan.reasoning {
        return Vec::new();
    }
    let [action, _] = protocol::LAZY_TRIGGERS;
    if free_answer {
        // A constrained request after the first is the decision alone (`grammar`).
        vec![action.to_string()]
    } else if stage == Stage::Whole {
        protocol::LAZY_TRIGGERS
            .iter()
            .map(|t| t.to_string())
            .collect()
    } else {
        Vec::new()
    }
}
