//! Context fitting in serve: a client's conversation fits the upstream's context window as a
//! run's history does, with the run's own fitting ([`ContextState::fit`], `agent/context/`).
//!
//! The window is the one the upstream client learned once ([`Model::context_window`]: stated,
//! or read from llama.cpp's `/props`, vLLM's and SGLang's model list, Ollama's endpoints);
//! unknown, nothing is fitted. Before every upstream request (repairs included) the prompt is
//! estimated, counted with the upstream's tokenizer when it comes near the window, and when
//! prompt, turn budget and margin do not fit: long tool results (old ones first) keep a head and
//! a tail around the run's cut marker, then the oldest turns become one line each, then the
//! turn's budget shrinks down to a floor. The system prompt (with the tools), the first question
//! and everything from the last assistant turn on (the latest user message) are never cut.
//! What still does not fit is a 400 `context_length_exceeded`, never a silently cut question. An
//! upstream that refuses a prompt as too long anyway gets it once more, fitted harder (its
//! refusal names its window and its count): the turn engine's rule, once a turn, as in a run
//! (`agent/turn/`); a second refusal is the 400 too.
//!
//! Every fitting is logged and kept in the request's transcript (the run's
//! [`Event::ContextFitted`]).

use serde_json::Value;

use super::ServeError;
use crate::agent::Event;
use crate::agent::context::{ContextPolicy, ContextState, Fit, FitTarget};
use crate::agent::history::History;
use crate::llm::{ContextOverflow, Model, TurnRequest};

/// The fitting of one request's upstream requests.
#[derive(Debug)]
pub(crate) struct Fitting {
    state: ContextState,
    policy: ContextPolicy,
    /// The turn budget the client asked for (or serve's default).
    asked: u32,
    /// Upstream requests fitted so far (the transcript's `step`).
    requests: u32,
}

impl Fitting {
    /// Fitting to `model`'s window (call after `prepare`), for turns of `asked` tokens.
    pub(crate) fn new(model: &dyn Model, asked: u32) -> Self {
        let state = ContextState {
            window: model.context_window(),
            ..ContextState::default()
        };
        Fitting {
            state,
            policy: ContextPolicy::default(),
            asked,
            requests: 0,
        }
    }

    /// Put `history`'s prompt into `request` (ending in `partial`, the cut turn being continued,
    /// when not empty), fitted, with the turn budget that fits (`overflow`: fitted harder, the
    /// upstream having refused the last prompt as too long): what was left out, for the
    /// transcript, when anything was. A conversation that cannot fit is a 400.
    pub(crate) async fn fit(
        &mut self,
        model: &dyn Model,
        history: &History,
        partial: &str,
        overflow: Option<ContextOverflow>,
        request: &mut TurnRequest,
    ) -> Result<Option<Value>, ServeError> {
        self.requests += 1;
        let target = FitTarget {
            model,
            policy: self.policy,
            max_tokens: Some(self.asked),
        };
        let (fit, event) = self
            .state
            .fit(target, history, partial, false, overflow, self.requests)
            .await;
        let ready = match fit {
            Fit::Ready(ready) => ready,
            Fit::Full { why, .. } => return Err(too_long(&why)),
        };
        request.prompt = ready.prompt.unwrap_or_else(|| history.prompt_now(partial));
        request.max_tokens = ready.max_tokens;
        Ok(event.map(|e| record(&e)))
    }
}

/// The 400 of a conversation that does not fit.
pub(crate) fn too_long(why: &str) -> ServeError {
    ServeError::ContextLength {
        message: format!(
            "the conversation does not fit the upstream model's context window, even with long tool results cut and old turns summarised ({why}); shorten the messages or lower max_tokens"
        ),
    }
}

/// A fitting as the log says it and the transcript keeps it.
fn record(event: &Event) -> Value {
    if let Event::ContextFitted {
        window,
        tokens_before,
        tokens_after,
        observations_cut,
        steps_summarised,
        max_tokens,
        after_refusal,
        ..
    } = event
    {
        tracing::info!(
            window,
            tokens_before,
            tokens_after,
            observations_cut,
            steps_summarised,
            max_tokens,
            after_refusal,
            "the conversation was fitted into the upstream's context window"
        );
    }
    serde_json::to_value(event).unwrap_or(Value::Null)
}
