//! A model turn in progress: what one turn has produced so far over its requests, and how it
//! goes on. A turn is one request, unless it is continued (after a stop string inside an open
//! string or `<think>` block, or once after a constrained turn was cut inside its thought);
//! [`TurnInProgress`] owns everything that lives for one turn only, and the run (`think.rs`)
//! asks the model and tells the caller. What it ends in is a [`ModelTurn`], or a [`TurnFailure`].

use std::sync::Arc;

use tracing::debug;

use crate::llm::{Finish, LlmError, TurnGrammar, TurnResult};
use crate::protocol::{self, Inside};

use super::context::PreparedRequest;
use super::grammars::Grammars;
use super::history::History;
use super::plan::TurnPlan;
use crate::policy::thought_end;

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

/// The turn as it was before its last continuation, to end it there when the server refuses to
/// continue.
struct BeforeContinuation {
    len: usize,
    finish: Finish,
    action_start: Option<usize>,
}

/// What the turn does after a request answered.
pub(crate) enum AfterAnswer {
    /// The turn never left its thought: the thought was closed with this text, and the next
    /// request asks for the decision alone, under the decision's grammar.
    ThoughtClosed(&'static str),
    /// A stop string fired inside an open string or `<think>` block: it was put back, and the
    /// next request continues the turn.
    Continued,
    /// The turn is over.
    Done(ModelTurn),
}

/// One model turn in progress, asked as its [`TurnPlan`] says.
pub(crate) struct TurnInProgress {
    pub(crate) plan: TurnPlan,
    /// The API can continue an unfinished turn (completions, or chat with prefill).
    can_continue: bool,
    /// The text generated so far, continuations joined.
    generated: String,
    continuations: u32,
    /// See [`ModelTurn::action_start`].
    action_start: Option<usize>,
    /// See [`ModelTurn::shows_reasoning`].
    reasoned: bool,
    /// The next request, already fitted (the first one, or a retry fitted harder).
    next: Option<PreparedRequest>,
    /// The server refused a prompt as too long once, and the turn was asked again fitted harder.
    overflow_retried: bool,
    /// The thought was closed and the turn continued (once per turn).
    thought_closed: bool,
    /// The next request is that continuation, asked under the decision's grammar.
    decision_next: bool,
    before: Option<BeforeContinuation>,
}

impl TurnInProgress {
    /// A turn whose first request is `first`, already fitted.
    pub(crate) fn new(plan: TurnPlan, can_continue: bool, first: PreparedRequest) -> Self {
        TurnInProgress {
            plan,
            can_continue,
            generated: String::new(),
            continuations: 0,
            action_start: None,
            reasoned: false,
            next: Some(first),
            overflow_retried: false,
            thought_closed: false,
            decision_next: false,
            before: None,
        }
    }

    /// The turn so far (empty before the first answer).
    pub(crate) fn partial(&self) -> &str {
        &self.generated
    }

    /// The next request when it was fitted already; `None`: fit one for [`Self::partial`].
    pub(crate) fn take_prepared(&mut self) -> Option<PreparedRequest> {
        self.next.take()
    }

    /// The grammar of the next request. A continuation starts inside the turn: the grammar of a
    /// whole turn does not fit. Right after the loop guard refused a repeated call, the turn
    /// gets the last turn's grammar (the model was just shown the result it keeps asking for);
    /// right after the decision step declined its call, the answer's, its thought begun by the
    /// runtime (the plain answer-only grammar should that one not be had).
    pub(crate) fn grammar(&mut self, grammars: &Grammars) -> Option<Arc<TurnGrammar>> {
        let last = self.plan.final_only || self.plan.after_refused_call;
        if self.generated.is_empty() && self.plan.after_decline {
            grammars
                .pick_declined(self.plan.reasoning)
                .or_else(|| grammars.pick(true, self.plan.reasoning))
        } else if self.generated.is_empty() {
            grammars.pick(last, self.plan.reasoning)
        } else if std::mem::take(&mut self.decision_next) {
            grammars.pick_decision(last)
        } else {
            None
        }
    }

    /// The whole-turn grammar holds the thought to one line: a sentence said three times there
    /// is a loop (see `RepeatGuard`). A free-text final answer is held to the same: small
    /// models that do not stop after their answer say it again and again (SmolLM2:
    /// "You can't do it.\n\n" until the ordinary guard cut it at 150 tokens), so the strict
    /// guard lasts until an `<action>` (whose arguments may repeat legitimately) and through
    /// the answer, in a whole turn or in the decision asked for alone after a cut thought
    /// (`free_answer`: the role has no output schema, whose JSON is left to the ordinary
    /// guard). Reasoning in `<think>` stays free.
    pub(crate) fn strict_repeats_until(&self, constrained: bool, free_answer: bool) -> Vec<String> {
        if !constrained || self.plan.reasoning {
            return Vec::new();
        }
        let [action, _] = protocol::LAZY_TRIGGERS;
        if free_answer {
            // A constrained request after the first is the decision alone (`Self::grammar`).
            vec![action.to_string()]
        } else if self.generated.is_empty() {
            protocol::LAZY_TRIGGERS
                .iter()
                .map(|t| t.to_string())
                .collect()
        } else {
            Vec::new()
        }
    }

    /// The server refused a prompt of this turn as too long once already, and the turn was
    /// asked again fitted harder (that happens once per turn).
    pub(crate) fn retried_fitted(&self) -> bool {
        self.overflow_retried
    }

    /// Ask `request` next: the retry, fitted harder, after the server refused the prompt as too
    /// long.
    pub(crate) fn ask_next(&mut self, request: PreparedRequest) {
        self.overflow_retried = true;
        self.next = Some(request);
    }

    /// Read a request's answer into the turn and say what follows: a thought to close, a stop
    /// string to put back, or the end of the turn.
    pub(crate) fn read(
        &mut self,
        result: TurnResult,
        history: &History,
        max_continuations: u32,
    ) -> AfterAnswer {
        self.generated.push_str(&result.text);
        self.reasoned |= shows_reasoning(&result);
        let text = history.turn_text(&self.generated);
        // What the server actually sent (a grammar it refused is not sent again).
        if result.constraint.is_constrained()
            && !self.thought_closed
            && self.can_continue
            && let Some(ending) = thought_end(&text, result.finish.was_cut())
        {
            self.keep_before(result.finish);
            let kept = self.generated.trim_end().len();
            self.generated.truncate(kept);
            self.generated.push_str(ending);
            (self.thought_closed, self.decision_next) = (true, true);
            return AfterAnswer::ThoughtClosed(ending);
        }
        if let Finish::Stop(stop) = &result.finish
            && self.can_continue
            && self.continuations < max_continuations
            && let Some(inside) = protocol::stopped_inside(&text, self.action_start)
        {
            debug!(stop = %stop, "stop string inside an open string or <think>: continuing the turn");
            self.keep_before(result.finish.clone());
            if let Inside::ActionString(start) = inside {
                self.action_start = Some(start);
            }
            self.generated.push_str(stop);
            self.continuations += 1;
            return AfterAnswer::Continued;
        }
        AfterAnswer::Done(self.finish(text, result.finish))
    }

    /// No room to go on: the turn is what it is, cut as by its token limit.
    pub(crate) fn cut(self, history: &History) -> ModelTurn {
        let text = history.turn_text(&self.generated);
        self.finish(text, Finish::Length)
    }

    /// The server would not continue the turn: it ends where it was before the continuation,
    /// when there was one and `may_end_there` (a chat server without prefill); `None` otherwise.
    pub(crate) fn end_before_continuation(
        &mut self,
        may_end_there: bool,
        history: &History,
    ) -> Option<ModelTurn> {
        match self.before.take() {
            Some(before) if may_end_there => {
                self.generated.truncate(before.len);
                self.action_start = before.action_start;
                let text = history.turn_text(&self.generated);
                Some(self.finish(text, before.finish))
            }
            _ => None,
        }
    }

    fn keep_before(&mut self, finish: Finish) {
        self.before = Some(BeforeContinuation {
            len: self.generated.len(),
            finish,
            action_start: self.action_start,
        });
    }

    fn finish(&self, text: String, finish: Finish) -> ModelTurn {
        ModelTurn {
            text,
            finish,
            action_start: self.action_start,
            shows_reasoning: self.reasoned,
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
