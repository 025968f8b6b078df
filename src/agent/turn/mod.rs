//! The turn engine: one model turn, asked the same way for a run's step and for a serve request.
//!
//! A turn is one request, unless it has to go on. The engine is the one place that says when:
//!
//! 1. **fit**: the request is fitted into the context window (the seat fits its own prompt:
//!    a run's history, a client's conversation); no room for a continuation ends the turn there;
//! 2. **ask**: the seat sends it, under the grammar of the turn's [`Stage`], and streams it to
//!    its caller;
//! 3. **go on**: a constrained turn cut inside its thought is closed there and continued once
//!    under the decision's grammar (`policy/thought_cut.rs`); a stop string that fired inside an
//!    open string or `<think>` block is put back and the turn continued, up to the rules' limit;
//!    a prompt the server refused as too long is fitted harder and asked once more; a chat server
//!    that refuses to continue ends the turn where it was before the continuation.
//!
//! What comes out is a [`ModelTurn`] (the continuations joined), or a [`TurnFailure`]. Reading and
//! judging it is the caller's next stage: a run's `decide.rs`, serve's `serve/answer.rs`, both
//! through the decision room (`crate::policy`).
//!
//! What differs between the two callers is their [`Seat`], an input: how a request is fitted
//! and sent, which grammar a stage gets, whom the engine tells what happened. A run's seat is
//! `think.rs`; serve's is `serve/seat.rs`.

mod progress;

use crate::llm::{Api, ContextOverflow, LlmError, Model, TurnResult};

use progress::{AfterAnswer, TurnInProgress};
pub(crate) use progress::{CloseThought, ModelTurn, Rules, Stage};

/// Why a turn could not be had.
#[derive(Debug)]
pub(crate) enum TurnFailure<S> {
    /// The model failed (after the client's retries).
    Model(LlmError),
    /// The prompt does not fit the context window, even fitted; `final_fits` when a
    /// final-answer-only turn still would.
    Context { final_fits: bool, why: String },
    /// The seat ended the turn itself (serve: its own error, or the guess declined every tool).
    Stopped(S),
}

/// A fitted request, or no room for one.
pub(crate) enum Fitted<P> {
    /// Send this.
    Ready(P),
    /// Not even the smallest turn fits; `final_fits` when a final-answer-only turn would.
    Full { final_fits: bool, why: String },
}

/// Why a request gave no answer.
pub(crate) enum Unanswered<S> {
    /// The model failed.
    Failed(LlmError),
    /// The seat stopped it.
    Stopped(S),
}

/// What differs between a run's turn and a serve request's: the engine's caller.
pub(crate) trait Seat {
    /// A fitted request, ready to send.
    type Prepared;
    /// Why the seat ends a turn itself.
    type Stop;
    /// The model asked, and the API it is asked through.
    fn upstream(&self) -> (&dyn Model, Api);
    /// Whether prompts are fitted into the context window (a refusal as too long is then fitted
    /// harder once).
    fn fits(&self) -> bool;
    /// Fit the next request, its prompt ending in `partial` (the turn so far); `overflow`: the
    /// server refused the last one as too long.
    async fn fit(
        &mut self,
        partial: &str,
        overflow: Option<ContextOverflow>,
    ) -> Result<Fitted<Self::Prepared>, Self::Stop>;
    /// Send `request`, asking for `stage` of a turn that so far is `partial`.
    async fn ask(
        &mut self,
        request: Self::Prepared,
        stage: Stage,
        partial: &str,
    ) -> Result<TurnResult, Unanswered<Self::Stop>>;
    /// The turn as the reader sees it, when the model generated `generated`.
    fn turn_text(&self, generated: &str) -> String;
    /// The tools' names the caller's reader knows (a call in another dialect names one).
    fn tool_names(&self) -> Vec<&str>;
    /// The server refused the prompt as too long: it is fitted harder and asked once more.
    fn refitting(&mut self, error: &LlmError);
    /// The turn never left its thought: `cut` as it was, closed with `ending`.
    fn thought_closed(&mut self, cut: &str, ending: &'static str);
}

/// Whether a turn can be continued through `api`: completions always, chat where the model
/// continues an assistant message (prefill).
pub(crate) fn can_continue(model: &dyn Model, api: Api) -> bool {
    api == Api::Completions || model.supports_prefill()
}

/// Ask one model turn through `seat`: `start` is what the turn begins with (empty: the model
/// writes all of it), `first` its first request when the seat fitted it already.
pub(crate) async fn ask_turn<S: Seat>(
    seat: &mut S,
    rules: Rules,
    start: String,
    first: Option<S::Prepared>,
) -> Result<ModelTurn, TurnFailure<S::Stop>> {
    let (model, api) = seat.upstream();
    let mut turn = TurnInProgress::new(rules, can_continue(model, api), start);
    let mut next = first;
    loop {
        let request = match next.take() {
            Some(request) => request,
            None => match seat.fit(turn.partial(), None).await {
                Ok(Fitted::Ready(request)) => request,
                Ok(Fitted::Full { .. }) => return Ok(turn.cut(&|g| seat.turn_text(g))),
                Err(stop) => return Err(TurnFailure::Stopped(stop)),
            },
        };
        let stage = turn.stage();
        let result = match seat.ask(request, stage, turn.partial()).await {
            Ok(result) => result,
            Err(Unanswered::Stopped(stop)) => return Err(TurnFailure::Stopped(stop)),
            Err(Unanswered::Failed(e)) => match after_error(seat, &mut turn, e).await? {
                Retry::Ask(request) => {
                    next = Some(request);
                    continue;
                }
                Retry::Ended(ended) => return Ok(ended),
            },
        };
        let names = seat.tool_names();
        match turn.read(result, &|g| seat.turn_text(g), &names) {
            AfterAnswer::ThoughtClosed { cut, ending } => seat.thought_closed(&cut, ending),
            AfterAnswer::Continued => {}
            AfterAnswer::Done(model_turn) => return Ok(model_turn),
        }
    }
}

/// What follows a failed request.
enum Retry<P> {
    /// Ask this, fitted harder.
    Ask(P),
    /// The turn ends as it was before its last continuation.
    Ended(ModelTurn),
}

/// The model failed: fitted harder once when the server refused the prompt as too long, the
/// turn ended where it was before a continuation a chat server would not make, or a failure.
async fn after_error<S: Seat>(
    seat: &mut S,
    turn: &mut TurnInProgress,
    e: LlmError,
) -> Result<Retry<S::Prepared>, TurnFailure<S::Stop>> {
    let fits = seat.fits();
    match e.context_overflow() {
        Some(overflow) if fits && !turn.retried_fitted() => {
            seat.refitting(&e);
            turn.refitted();
            match seat.fit(turn.partial(), Some(overflow)).await {
                Ok(Fitted::Ready(request)) => Ok(Retry::Ask(request)),
                Ok(Fitted::Full { final_fits, why }) => {
                    Err(TurnFailure::Context { final_fits, why })
                }
                Err(stop) => Err(TurnFailure::Stopped(stop)),
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
            let (model, api) = seat.upstream();
            let chat = api == Api::Chat && !model.supports_prefill();
            match turn.end_before_continuation(chat, &|g| seat.turn_text(g)) {
                Some(ended) => Ok(Retry::Ended(ended)),
                None => Err(TurnFailure::Model(e)),
            }
        }
    }
}

#[cfg(test)]
mod test_seat;
#[cfg(test)]
mod tests;
