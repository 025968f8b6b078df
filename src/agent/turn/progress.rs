//! A model turn in progress: what one turn has produced so far over its requests, and how it
//! goes on (the engine's state, `mod.rs`): the [`Rules`] it goes on by, the [`Stage`] each
//! request asks for, and the [`ModelTurn`] it ends in. [`TurnInProgress`] owns everything that
//! lives for one turn only; it asks nothing and tells no one: the engine does both through its
//! seat.

use tracing::debug;

use crate::llm::{Finish, TurnResult};
use crate::policy::thought_end;
use crate::protocol::{self, Inside};

/// What a request of a turn asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The whole turn: every request until one of the turn answers (its first, and that one's
    /// retry fitted harder). A later retry keeps the stage of no grammar, `Continuation`.
    Whole,
    /// The decision alone, after the engine closed a thought that never ended.
    Decision,
    /// The rest of a turn continued after a stop string: no whole-turn grammar fits there.
    Continuation,
}

/// Which turns cut inside their thought are closed there and continued (once a turn).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CloseThought {
    /// None (the caller corrects them instead).
    Never,
    /// Those the server constrained (a run: only a grammar makes a thought endless).
    Constrained,
    /// Any (serve: a client's turn is corrected otherwise, and asked again at temperature 0 the
    /// model writes the same endless thought).
    Any,
}

/// How a turn may go on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules {
    /// Most continuations after a stop string inside an open string or `<think>` (0: none).
    pub(crate) max_continuations: u32,
    /// Which cut thoughts are closed and continued.
    pub(crate) close_thought: CloseThought,
}

/// What one model turn gave, continuations joined.
#[derive(Debug)]
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
    /// The server's separate reasoning of the turn's last request.
    pub(crate) reasoning: Option<String>,
}

/// The turn as it was before its last continuation, to end it there when the server refuses to
/// continue.
struct BeforeContinuation {
    len: usize,
    finish: Finish,
    action_start: Option<usize>,
}

/// What the turn does after a request answered.
pub(super) enum AfterAnswer {
    /// The turn never left its thought: the thought was closed with `ending`, and the next
    /// request asks for the decision alone ([`Stage::Decision`]). `cut` is the turn as it was
    /// cut, as the reader sees it.
    ThoughtClosed { cut: String, ending: &'static str },
    /// A stop string fired inside an open string or `<think>` block: it was put back, and the
    /// next request continues the turn.
    Continued,
    /// The turn is over.
    Done(ModelTurn),
}

/// One model turn in progress, going on as its [`Rules`] allow.
pub(super) struct TurnInProgress {
    rules: Rules,
    /// The API can continue an unfinished turn (completions, or chat with prefill).
    can_continue: bool,
    /// The text generated so far, continuations joined (and the turn's start, when the caller
    /// began it).
    generated: String,
    /// A request of this turn answered (the next one is not the turn's first).
    answered: bool,
    continuations: u32,
    /// See [`ModelTurn::action_start`].
    action_start: Option<usize>,
    /// See [`ModelTurn::shows_reasoning`].
    reasoned: bool,
    /// The last answer's separate reasoning (see [`ModelTurn::reasoning`]).
    reasoning: Option<String>,
    /// The server refused a prompt as too long once, and the turn was asked again fitted harder.
    overflow_retried: bool,
    /// The thought was closed and the turn continued (once per turn).
    thought_closed: bool,
    /// The next request is that continuation, asked under the decision's grammar.
    decision_next: bool,
    before: Option<BeforeContinuation>,
}

impl TurnInProgress {
    /// A turn that begins with `start` (empty: the model writes all of it).
    pub(super) fn new(rules: Rules, can_continue: bool, start: String) -> Self {
        TurnInProgress {
            rules,
            can_continue,
            generated: start,
            answered: false,
            continuations: 0,
            action_start: None,
            reasoned: false,
            reasoning: None,
            overflow_retried: false,
            thought_closed: false,
            decision_next: false,
            before: None,
        }
    }

    /// The turn so far: what the prompt of its next request ends in.
    pub(super) fn partial(&self) -> &str {
        &self.generated
    }

    /// What the next request asks for: the whole turn until one answered, then the decision
    /// once after a closed thought, else the rest of a continued turn.
    pub(super) fn stage(&mut self) -> Stage {
        if !self.answered {
            Stage::Whole
        } else if std::mem::take(&mut self.decision_next) {
            Stage::Decision
        } else {
            Stage::Continuation
        }
    }

    /// The server refused a prompt of this turn as too long once already, and the turn was
    /// asked again fitted harder (that happens once per turn).
    pub(super) fn retried_fitted(&self) -> bool {
        self.overflow_retried
    }

    /// The next request is the retry, fitted harder.
    pub(super) fn refitted(&mut self) {
        self.overflow_retried = true;
    }

    /// Read a request's answer into the turn and say what follows: a thought to close, a stop
    /// string to put back, or the end of the turn. `text_of` gives the turn as the reader sees
    /// it (the history's `turn_text`), `names` the tools its reader knows.
    pub(super) fn read(
        &mut self,
        result: TurnResult,
        text_of: &dyn Fn(&str) -> String,
        names: &[&str],
    ) -> AfterAnswer {
        self.answered = true;
        self.generated.push_str(&result.text);
        self.reasoned |= shows_reasoning(&result);
        self.reasoning = result.reasoning;
        let text = text_of(&self.generated);
        // What the server actually sent (a grammar it refused is not sent again).
        let closes = match self.rules.close_thought {
            CloseThought::Never => false,
            CloseThought::Constrained => result.constraint.is_constrained(),
            CloseThought::Any => true,
        };
        if closes
            && !self.thought_closed
            && self.can_continue
            && let Some(ending) = thought_end(&text, result.finish.was_cut(), names)
        {
            let kept = self.generated.trim_end().len();
            self.generated.truncate(kept);
            // Before the ending: a server that will not continue ends the turn here.
            self.keep_before(result.finish);
            self.generated.push_str(ending);
            (self.thought_closed, self.decision_next) = (true, true);
            return AfterAnswer::ThoughtClosed { cut: text, ending };
        }
        if let Finish::Stop(stop) = &result.finish
            && self.can_continue
            && self.continuations < self.rules.max_continuations
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
    pub(super) fn cut(self, text_of: &dyn Fn(&str) -> String) -> ModelTurn {
        let text = text_of(&self.generated);
        self.finish(text, Finish::Length)
    }

    /// The server would not continue the turn: it ends where it was before the continuation,
    /// when there was one and `may_end_there` (a chat server without prefill); `None` otherwise.
    pub(super) fn end_before_continuation(
        &mut self,
        may_end_there: bool,
        text_of: &dyn Fn(&str) -> String,
    ) -> Option<ModelTurn> {
        match self.before.take() {
            Some(before) if may_end_there => {
                self.generated.truncate(before.len);
                self.action_start = before.action_start;
                let text = text_of(&self.generated);
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
            reasoning: self.reasoning.clone(),
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
