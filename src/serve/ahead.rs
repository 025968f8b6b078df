//! The guess asked ahead: serve's check of a first call (`policy/guess.rs`) asked beside the turn,
//! not after it.
//!
//! The guess is one short request of the question alone. Asked after the turn, it added its
//! whole time to every judged call, and on a question no tool fits the turn's call was written
//! in full only to be declined and asked again for an answer (BFCL irrelevance on the 0.5B:
//! three requests a case, about twice native llama.cpp's seconds). So where a first call may be
//! judged (`tool_choice: auto`, the conversation ending in the user's question, a turn that
//! may fall back to an answer), the guess is sent when the turn is, and the two race:
//!
//! - **The guess answers first and no declared tool shares a word with it** (the verdict that
//!   would decline a call of any of them, `guess::verdict` over all the tools): whatever call
//!   the turn is writing would be declined, so the turn is dropped (the upstream stops
//!   generating when the connection closes) and the same prompt is asked for an answer only,
//!   as after a declined call. Not once anything of the turn went out to a streaming client.
//! - Otherwise the turn goes on, and when it makes a first call the guess judges it as
//!   before: already answered, or awaited then.
//!
//! On a server with one slot the two requests queue, so the guess costs about what it cost
//! after the turn; on a server with more (llama-server's default), its time hides under the
//! turn's. A turn that ends in no judged call (a text answer, a call the grounding rule
//! declines) leaves the guess unused: it is dropped, and its request with it.
//!
//! **The choice** (`policy/choice_odds.rs`, where the client gave `--choice-cut`) is a second
//! check raced the same way: its request is the turn's own fitted prompt with the ask after the
//! question (`choice.rs`), sent when the turn is. Answered first with a margin below the cut, it
//! drops the turn as the guess does; otherwise a first call is judged by it before the guess,
//! and a call it declines is not asked of the guess.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, Ordering};

use super::ServeError;
use super::choice::{self, Chosen};
use super::request::Ask;
use crate::agent::guess::request;
use crate::llm::{Api, Model, TurnRequest, Usage};
use crate::policy::guess::{self, Guessed, Verdict};
use crate::policy::{Choice, Entry, Judgement, ToolSpec, choice_odds, name_of};
use crate::shown::Outside;

/// A check's request in flight: what it gave and its usage.
type Pending<'a, T> = Pin<Box<dyn Future<Output = (T, Usage)> + Send + 'a>>;

/// One check asked beside the turn: in flight, answered, or answered and its usage counted.
enum Check<'a, T> {
    Pending(Pending<'a, T>),
    /// Answered; its usage not yet added to the request's.
    Answered(T, Usage),
    /// Answered, and its usage counted.
    Counted(T),
}

impl<'a, T: Clone> Check<'a, T> {
    /// What it gave, once answered.
    fn answer(&self) -> Option<&T> {
        match self {
            Check::Pending(_) => None,
            Check::Answered(t, _) | Check::Counted(t) => Some(t),
        }
    }

    /// Await it (for at most `bound`, when given: `on_timeout` then stands for its answer).
    async fn settle(&mut self, bound: Option<std::time::Duration>, on_timeout: impl FnOnce() -> T) {
        if let Check::Pending(pending) = self {
            let (answer, used) = match bound {
                Some(bound) => tokio::time::timeout(bound, pending)
                    .await
                    .unwrap_or_else(|_| (on_timeout(), Usage::default())),
                None => pending.await,
            };
            *self = Check::Answered(answer, used);
        }
    }

    /// Add its usage to `usage`, once.
    fn count(&mut self, usage: &mut Usage) {
        if let Check::Answered(answer, used) = self {
            usage.add(*used);
            *self = Check::Counted(answer.clone());
        }
    }
}

/// The choice: its cut, and its check once the turn's prompt was there to ask it on.
struct Chooser<'a> {
    cut: f64,
    check: Option<Check<'a, Chosen>>,
}

/// The checks asked ahead for one request.
pub(crate) struct Ahead<'a> {
    model: &'a dyn Model,
    question: &'a str,
    tools: Vec<&'a ToolSpec>,
    /// The guess's own time limit (`--guess-timeout`), counted from when a call waits for it.
    bound: Option<std::time::Duration>,
    guess: Option<Check<'a, Guessed>>,
    choice: Option<Chooser<'a>>,
}

/// How a turn raced against the checks ended.
pub(crate) enum Raced<T> {
    /// The turn ended: its result.
    Turn(T),
    /// A check declined every tool before the turn ended: the turn was dropped. The
    /// judgement says why.
    Declined(Judgement),
}

/// Which checks to ask.
pub(crate) struct Checks {
    /// The guess (`policy/guess.rs`).
    pub guess: bool,
    /// The choice, with its cut (`policy/choice_odds.rs`).
    pub choice: Option<f64>,
}

impl<'a> Ahead<'a> {
    /// Send the guess for `ask` if a first call of it may be judged (see the module docs),
    /// and make ready the choice, asked with the turn (`ask_choice`): `may_fall_back` is
    /// whether the turn may still end in an answer. `None` when no check is asked.
    pub(crate) fn start(
        model: &'a dyn Model,
        api: Api,
        bound: Option<std::time::Duration>,
        ask: &'a Ask,
        may_fall_back: bool,
        checks: Checks,
    ) -> Option<Self> {
        let Some(Entry::Question(question)) = ask.conversation.last() else {
            return None;
        };
        if !may_fall_back || ask.choice != Choice::Auto || ask.tools.is_empty() {
            return None;
        }
        if !checks.guess && checks.choice.is_none() {
            return None;
        }
        let question = question.as_str();
        Some(Ahead {
            model,
            question,
            tools: ask.tools.iter().collect(),
            bound,
            guess: checks
                .guess
                .then(|| Check::Pending(Box::pin(ask_guess(model, api, question)))),
            choice: checks.choice.map(|cut| Chooser { cut, check: None }),
        })
    }

    /// Whether the guess was sent.
    pub(crate) fn guessed(&self) -> bool {
        self.guess.is_some()
    }

    /// Send the choice on the turn's fitted `turn` request, once (the first turn's: a later
    /// attempt's prompt holds corrections); whether it was sent now.
    pub(crate) fn ask_choice(&mut self, turn: &TurnRequest) -> bool {
        let Some(chooser) = self.choice.as_mut() else {
            return false;
        };
        if chooser.check.is_some() {
            return false;
        }
        let Some(asked) = choice::request(turn) else {
            tracing::debug!(
                "the choice is not asked: the turn's prompt does not end in the question"
            );
            self.choice = None;
            return false;
        };
        let names = self.tools.iter().map(|t| t.name.clone()).collect();
        chooser.check = Some(Check::Pending(Box::pin(choice::ask(
            self.model, asked, names,
        ))));
        true
    }

    /// Run `turn` beside the checks. When one answers first and declines every tool, and
    /// nothing of the turn has gone out yet (`committed`, set by the turn's stream), the turn
    /// is dropped.
    pub(crate) async fn race<T>(
        &mut self,
        turn: impl Future<Output = T>,
        committed: &AtomicBool,
    ) -> Raced<T> {
        let mut turn = pin!(turn);
        loop {
            if !committed.load(Ordering::Relaxed)
                && let Some(judgement) = self.declines_every_tool()
            {
                tracing::debug!(rule = judgement.rule, why = %Outside(&judgement.why), "a check declined every tool before the turn's call");
                return Raced::Declined(judgement);
            }
            let guess = match &mut self.guess {
                Some(Check::Pending(p)) => Some(p),
                _ => None,
            };
            let choice = match self.choice.as_mut().and_then(|c| c.check.as_mut()) {
                Some(Check::Pending(p)) => Some(p),
                _ => None,
            };
            if guess.is_none() && choice.is_none() {
                return Raced::Turn(turn.await);
            }
            // Polled in this order, the choice's request goes out first: on a server with one
            // slot it is answered before the turn is generated (a turn it declines is never
            // written), and the turn's prompt, all but the ask, is then in the server's cache.
            tokio::select! {
                biased;
                (chosen, used) = maybe(choice) => {
                    if let Some(chooser) = self.choice.as_mut() {
                        chooser.check = Some(Check::Answered(chosen, used));
                    }
                }
                ended = &mut turn => return Raced::Turn(ended),
                (guessed, used) = maybe(guess) => {
                    self.guess = Some(Check::Answered(guessed, used));
                }
            }
        }
    }

    /// The judgement of `called`: the choice's first (awaiting it), then, should it keep the
    /// call, the guess's (awaiting it for at most its own bound, from now: the turn's time is
    /// not the guess's). Their usage is added to `usage` the first time. A check the request's
    /// time limit ended ends the request (504), as any upstream request it ends.
    pub(crate) async fn judge(
        &mut self,
        called: &[&ToolSpec],
        usage: &mut Usage,
    ) -> Result<Vec<Judgement>, ServeError> {
        let mut judged = Vec::new();
        if let Some(chooser) = self.choice.as_mut()
            && let Some(check) = chooser.check.as_mut()
        {
            check.settle(None, || Chosen::Failed).await;
            check.count(usage);
            let verdict = match check.answer() {
                Some(Chosen::OutOfTime(secs)) => return Err(ServeError::Timeout { secs: *secs }),
                Some(Chosen::Read(margin)) => choice_odds::judgement(*margin, chooser.cut, called),
                Some(Chosen::Failed) | None => choice_odds::judgement(None, chooser.cut, called),
            };
            let declined = verdict.declined;
            judged.push(verdict);
            if declined {
                return Ok(judged);
            }
        }
        if let Some(check) = self.guess.as_mut() {
            let bound = self.bound;
            check
                .settle(bound, || {
                    let seconds = bound.map_or(0.0, |b| b.as_secs_f64());
                    tracing::warn!(seconds, "the guess took too long; the call is kept");
                    Guessed::TimedOut(seconds)
                })
                .await;
            check.count(usage);
            let guessed = check.answer().cloned().unwrap_or(Guessed::NoName);
            if let Guessed::OutOfTime(secs) = guessed {
                return Err(ServeError::Timeout { secs });
            }
            judged.push(guess::judgement(&guessed, self.question, called));
        }
        Ok(judged)
    }

    /// Add the answered checks' usage to `usage`, once each.
    pub(crate) fn count(&mut self, usage: &mut Usage) {
        if let Some(check) = self.guess.as_mut() {
            check.count(usage);
        }
        if let Some(check) = self.choice.as_mut().and_then(|c| c.check.as_mut()) {
            check.count(usage);
        }
    }

    /// The judgement declining every declared tool, when an answered check does.
    fn declines_every_tool(&self) -> Option<Judgement> {
        if let Some(chooser) = &self.choice
            && let Some(Chosen::Read(Some(margin))) = chooser.check.as_ref().and_then(Check::answer)
            && *margin < chooser.cut
        {
            return Some(Judgement {
                before_call: true,
                ..choice_odds::judgement(Some(*margin), chooser.cut, &self.tools)
            });
        }
        let Some(Guessed::Named(name)) = self.guess.as_ref().and_then(Check::answer) else {
            return None;
        };
        match guess::verdict(self.question, name, &self.tools) {
            Verdict::Decline(why) => Some(Judgement {
                before_call: true,
                ..Judgement::guess(&self.tools, Some(name.clone()), true, why)
            }),
            Verdict::Keep(_) => None,
        }
    }
}

/// A check's answer, or never when there is none in flight (a branch of the race that waits).
async fn maybe<T>(pending: Option<&mut Pending<'_, T>>) -> (T, Usage) {
    match pending {
        Some(pending) => pending.await,
        None => std::future::pending().await,
    }
}

/// Ask `model` for its guess at `question`'s function: the outcome and the request's usage
/// (default when it was not answered). The guess has what is left of the request's time
/// limit, as any upstream request of the answer has: the caller's deadline ends the request
/// (504) and not the check; a bound of its own (`--guess-timeout`) is `ahead.rs`'s.
async fn ask_guess(model: &dyn Model, api: Api, question: &str) -> (Guessed, Usage) {
    let request = request(question, api, model.wants_grammar());
    let mut ignore = |_: &str| {};
    match model.turn(&request, &mut ignore).await {
        Ok(result) => {
            let guessed = match name_of(&result.text) {
                Some(name) => Guessed::Named(name),
                None => {
                    tracing::debug!("the guess at the question's function named none");
                    Guessed::NoName
                }
            };
            (guessed, result.usage)
        }
        Err(e) => {
            if let Some(ServeError::Timeout { secs }) = ServeError::out_of_time(&e) {
                tracing::warn!(secs, "the request's time ran out during the guess");
                return (Guessed::OutOfTime(secs), Usage::default());
            }
            tracing::warn!(error = %Outside(&e), "the guess at the question's function failed; a call is kept");
            (Guessed::Failed(e.status()), Usage::default())
        }
    }
}
