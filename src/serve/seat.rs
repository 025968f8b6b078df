//! Serve's seat in the turn engine (`agent/turn/`): how a request's turn is fitted (the client's
//! conversation, `fit.rs`), which grammar each stage gets (`grammar.rs`), how the upstream is
//! asked (the answer watched as it streams, `live.rs`; raced with the guess sent beside the
//! first turn, `ahead.rs`), and what the transcript keeps of a turn the engine continued.
//!
//! A seat lives for one turn of a request: `answer.rs` makes one per attempt, and reads what it
//! left (the part of an answer already sent to the client) when the turn is over.

use std::sync::atomic::{AtomicBool, Ordering};

use super::ServeError;
use super::ahead::{Ahead, Raced};
use super::core::{Core, Trace};
use super::event::ServeEvent;
use super::fit::Fitting;
use super::grammar;
use super::live::{Live, Sent};
use super::request::Ask;
use crate::agent::history::History;
use crate::agent::turn::{Fitted, Seat, Stage, Unanswered};
use crate::llm::{Api, ContextOverflow, LlmError, Model, TurnRequest, TurnResult};
use crate::policy::Judgement;

/// What the transcript says of a turn cut inside its thought and continued (no correction is
/// sent: the turn goes on from the cut).
const CONTINUED: &str =
    "(not corrected: cut inside its thought; the thought was closed and the turn continued)";

/// Why serve's seat ended a turn itself.
pub(crate) enum Stop {
    /// The request cannot be answered (a conversation that does not fit).
    Failed(ServeError),
    /// The guess declined every declared tool before the turn ended: whatever call the turn was
    /// writing would be declined, so it was dropped unread (its usage is not known).
    Declined(Judgement),
}

/// One turn of a serve request, as the engine's seat.
pub(crate) struct Asking<'s, 'a> {
    pub(crate) core: &'s Core<'a>,
    pub(crate) ask: &'s Ask,
    pub(crate) history: &'s History,
    /// The request being asked: its prompt and turn budget fitted before each send.
    pub(crate) request: &'s mut TurnRequest,
    pub(crate) fitting: &'s mut Fitting,
    pub(crate) trace: &'s mut Trace,
    /// The guess the turn is raced with (none once the request may only answer).
    pub(crate) ahead: Option<&'s mut Ahead<'a>>,
    /// Whether an answer may stream before its turn is whole, and the tools' names (`live.rs`).
    pub(crate) may_stream: bool,
    pub(crate) names: &'s [&'s str],
    pub(crate) emit: &'s mut (dyn FnMut(ServeEvent) + Send),
    /// The request asks for an answer only (the grammar after a closed thought is the answer's).
    pub(crate) answer_only: bool,
    /// What the last request committed and sent of its turn, when it did.
    pub(crate) sent: Option<Sent>,
    /// The engine closed a cut thought in this turn (and asked for its decision), whatever the
    /// turn then became: the request's one closing is used.
    pub(crate) closed_thought: bool,
}

impl Seat for Asking<'_, '_> {
    /// The fitted prompt is in `request` already.
    type Prepared = ();
    type Stop = Stop;

    fn upstream(&self) -> (&dyn Model, Api) {
        (self.core.model, self.core.api)
    }

    fn fits(&self) -> bool {
        true
    }

    async fn fit(
        &mut self,
        partial: &str,
        overflow: Option<ContextOverflow>,
    ) -> Result<Fitted<()>, Stop> {
        // Fitted with what a continued turn already wrote (the prompt then ends in it).
        let fitting = self.fitting.fit(
            self.core.model,
            self.history,
            partial,
            overflow,
            self.request,
        );
        match fitting.await {
            Ok(fitted) => {
                self.trace.fitted.extend(fitted);
                Ok(Fitted::Ready(()))
            }
            Err(e) => Err(Stop::Failed(e)),
        }
    }

    async fn ask(
        &mut self,
        (): (),
        stage: Stage,
        partial: &str,
    ) -> Result<TurnResult, Unanswered<Stop>> {
        if stage == Stage::Decision && self.request.grammar.is_some() {
            // The thought is in the prompt now: a grammar that opens one (or writes the
            // runtime's words) would have it written again.
            let core = self.core;
            self.request.grammar =
                grammar::after_thought(self.ask, core.api, core.thought, self.answer_only);
        }
        self.trace.requests += 1;
        let history = self.history;
        let view = move |generated: &str| history.turn_text(&format!("{partial}{generated}"));
        let mut live = Live::new(self.may_stream, self.names, &view);
        let committed = AtomicBool::new(false);
        let emit = &mut *self.emit;
        let mut on_delta = |delta: &str| {
            live.push(delta, &mut *emit);
            if live.sent().is_some() {
                committed.store(true, Ordering::Relaxed);
            }
        };
        let turn = self.core.model.turn(self.request, &mut on_delta);
        let ended = match self.ahead.as_deref_mut() {
            Some(ahead) => ahead.race(turn, &committed).await,
            None => Raced::Turn(turn.await),
        };
        // The guess's request, once answered, counts whatever the turn became.
        if let Some(ahead) = self.ahead.as_deref_mut() {
            ahead.count(&mut self.trace.usage);
        }
        self.sent = live.sent().cloned();
        match ended {
            Raced::Turn(Ok(result)) => {
                self.trace.usage.add(result.usage);
                Ok(result)
            }
            Raced::Turn(Err(e)) => Err(Unanswered::Failed(e)),
            Raced::Declined(judged) => Err(Unanswered::Stopped(Stop::Declined(judged))),
        }
    }

    fn turn_text(&self, generated: &str) -> String {
        self.history.turn_text(generated)
    }

    fn tool_names(&self) -> Vec<&str> {
        self.names.to_vec()
    }

    fn refitting(&mut self, error: &LlmError) {
        if let Some(overflow) = error.context_overflow() {
            tracing::info!(requested = ?overflow.requested, window = ?overflow.window,
                "the upstream refused the prompt as longer than its context window: fitting it harder and asking once more");
        }
    }

    fn thought_closed(&mut self, cut: &str, _ending: &'static str) {
        // Asked again, the model would write the same thought (the correction does not change
        // what it writes at temperature 0); closed here, what comes next is its decision, read
        // and validated as any turn's.
        tracing::debug!("a turn cut inside its thought is continued");
        self.closed_thought = true;
        self.trace
            .turns
            .push((cut.to_string(), Some(CONTINUED.into())));
    }
}
