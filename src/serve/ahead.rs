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

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, Ordering};

use super::ServeError;
use super::request::Ask;
use crate::agent::guess::request;
use crate::llm::{Api, Model, Usage};
use crate::policy::guess::{self, Guessed, Verdict};
use crate::policy::{Choice, Entry, Judgement, ToolSpec, name_of};
use crate::shown::Outside;

/// A guess in flight.
type Pending<'a> = Pin<Box<dyn Future<Output = (Guessed, Usage)> + Send + 'a>>;

/// The guess asked ahead for one request.
pub(crate) struct Ahead<'a> {
    question: &'a str,
    tools: Vec<&'a ToolSpec>,
    /// The guess's own time limit (`--guess-timeout`), counted from when a call waits for it.
    bound: Option<std::time::Duration>,
    state: State<'a>,
}

enum State<'a> {
    Pending(Pending<'a>),
    /// Answered; its usage not yet added to the request's.
    Answered(Guessed, Usage),
    /// Answered, and its usage counted.
    Counted(Guessed),
}

/// How a turn raced against the guess ended.
pub(crate) enum Raced<T> {
    /// The turn ended: its result.
    Turn(T),
    /// The guess declined every tool before the turn ended: the turn was dropped. The
    /// judgement says why.
    Declined(Judgement),
}

impl<'a> Ahead<'a> {
    /// Send the guess for `ask` if a first call of it may be judged (see the module docs):
    /// `may_fall_back` is whether the turn may still end in an answer.
    pub(crate) fn start(
        model: &'a dyn Model,
        api: Api,
        bound: Option<std::time::Duration>,
        ask: &'a Ask,
        may_fall_back: bool,
    ) -> Option<Self> {
        let Some(Entry::Question(question)) = ask.conversation.last() else {
            return None;
        };
        if !may_fall_back || ask.choice != Choice::Auto || ask.tools.is_empty() {
            return None;
        }
        let question = question.as_str();
        Some(Ahead {
            question,
            tools: ask.tools.iter().collect(),
            bound,
            state: State::Pending(Box::pin(ask_guess(model, api, question))),
        })
    }

    /// Run `turn` beside the guess. When the guess answers first and declines every tool, and
    /// nothing of the turn has gone out yet (`committed`, set by the turn's stream), the turn
    /// is dropped.
    pub(crate) async fn race<T>(
        &mut self,
        turn: impl Future<Output = T>,
        committed: &AtomicBool,
    ) -> Raced<T> {
        let mut turn = pin!(turn);
        if let State::Pending(guess) = &mut self.state {
            let (guessed, usage) = tokio::select! {
                biased;
                ended = &mut turn => return Raced::Turn(ended),
                answered = guess => answered,
            };
            self.state = State::Answered(guessed, usage);
        }
        if !committed.load(Ordering::Relaxed)
            && let Some(judgement) = self.declines_every_tool()
        {
            tracing::debug!(why = %Outside(&judgement.why), "the guess declined every tool before the turn's call");
            return Raced::Declined(judgement);
        }
        Raced::Turn(turn.await)
    }

    /// The guess's judgement of `called`, awaiting it if it has not answered (for at most its
    /// own bound, from now: the turn's time is not the guess's); its usage is added to `usage`
    /// the first time. A guess the request's time limit ended ends the request (504), as any
    /// upstream request it ends.
    pub(crate) async fn judge(
        &mut self,
        called: &[&ToolSpec],
        usage: &mut Usage,
    ) -> Result<Judgement, ServeError> {
        if let State::Pending(guess) = &mut self.state {
            let (guessed, used) = match self.bound {
                Some(bound) => tokio::time::timeout(bound, guess)
                    .await
                    .unwrap_or_else(|_| {
                        let seconds = bound.as_secs_f64();
                        tracing::warn!(seconds, "the guess took too long; the call is kept");
                        (Guessed::TimedOut(seconds), Usage::default())
                    }),
                None => guess.await,
            };
            self.state = State::Answered(guessed, used);
        }
        self.count(usage);
        let guessed = match &self.state {
            State::Counted(guessed) => guessed,
            // `count` leaves the state counted.
            State::Pending(_) | State::Answered(..) => &Guessed::NoName,
        };
        if let Guessed::OutOfTime(secs) = guessed {
            return Err(ServeError::Timeout { secs: *secs });
        }
        Ok(guess::judgement(guessed, self.question, called))
    }

    /// Add the answered guess's usage to `usage`, once.
    pub(crate) fn count(&mut self, usage: &mut Usage) {
        if let State::Answered(guessed, used) = &self.state {
            usage.add(*used);
            self.state = State::Counted(guessed.clone());
        }
    }

    /// The judgement declining every declared tool, when the answered guess does.
    fn declines_every_tool(&self) -> Option<Judgement> {
        let (State::Answered(Guessed::Named(name), _) | State::Counted(Guessed::Named(name))) =
            &self.state
        else {
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
