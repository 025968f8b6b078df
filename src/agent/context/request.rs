//! Fitting one request of a run: decide whether the prompt fits, count it when it is near the
//! window, shorten the history sent, shrink the turn's budget, and say what was done. The run's
//! [`ContextState`] owns this: it is the state fitting reads and changes between requests, and
//! fitting is its method; the run hands it its model, policy and budget ([`FitTarget`]) and the
//! history, and emits the event. `tagloop serve` fits a client's conversation with the same
//! method (`serve/fit.rs`).

use tracing::debug;

use crate::llm::{ContextOverflow, Model, Prompt};

use super::super::Agent;
use super::super::events::Event;
use super::super::history::History;
use super::count::{TokenEstimator, prompt_bytes};
use super::final_turn::{self, FINAL_NOTE};
use super::fit::fit_messages_within;
use super::policy::ContextPolicy;
use crate::shown::Outside;

/// What a run knows of its context between requests.
#[derive(Debug)]
pub(crate) struct ContextState {
    /// The model's window in tokens, learned after `prepare`; `None`: nothing is fitted.
    pub(crate) window: Option<u64>,
    /// The prompt-size estimate, calibrated by every answer's `prompt_tokens`.
    pub(crate) estimator: TokenEstimator,
    /// The window left room for one final-answer-only turn: this is it.
    pub(crate) final_only: bool,
    /// The server's count of the last request sent, as the run figured it, when it was the
    /// server's own count (`/tokenize`): what a refusal's count is compared with.
    pub(crate) sent_count: Option<u64>,
    /// How much more the server counts when it serves a prompt than its tokenizer said (1 until
    /// a refusal showed otherwise). A tokenizer endpoint can disagree with what the server
    /// enforces (its chat template applied differently, say); once a refusal has shown by how
    /// much, every later count is raised by that much, so that the run is not refused again
    /// on every later turn.
    pub(crate) count_scale: f64,
}

impl Default for ContextState {
    fn default() -> Self {
        ContextState {
            window: None,
            estimator: TokenEstimator::default(),
            final_only: false,
            sent_count: None,
            count_scale: 1.0,
        }
    }
}

/// What a request is fitted for: the model (whose tokenizer counts a prompt near the window),
/// the context policy, and the turn's token budget as asked.
#[derive(Clone, Copy)]
pub(crate) struct FitTarget<'a> {
    pub(crate) model: &'a dyn Model,
    pub(crate) policy: ContextPolicy,
    pub(crate) max_tokens: Option<u32>,
}

impl<'a> FitTarget<'a> {
    /// A run's: its agent's model, policy and budget.
    pub(crate) fn of(agent: &'a Agent) -> Self {
        FitTarget {
            model: agent.model.as_ref(),
            policy: agent.config.context,
            max_tokens: agent.config.max_tokens,
        }
    }
}

/// A request that fits, ready to be sent.
#[derive(Debug)]
pub(crate) struct PreparedRequest {
    /// The fitted prompt; `None`: the history as it is (nothing had to be left out).
    pub(crate) prompt: Option<Prompt>,
    /// The turn's token budget (shrunk when the window is nearly full).
    pub(crate) max_tokens: Option<u32>,
}

/// The result of fitting a request.
#[derive(Debug)]
pub(crate) enum Fit {
    /// Send this.
    Ready(PreparedRequest),
    /// Not even the smallest turn fits; `final_fits` when a final-answer-only turn would.
    Full { final_fits: bool, why: String },
}

/// A request counts its tokens with the server when its estimate reaches this share of the
/// window (3/4): far from the window the estimate's error cannot matter.
const NEAR: (u64, u64) = (3, 4);

impl ContextState {
    /// Fit the next request of `history` to `to` (the turn so far is `partial`;
    /// `final_only` for a turn that may only answer). `overflow`: the server just refused the
    /// last one as too long, so fit harder. When something was left out or the budget shrunk,
    /// the [`Event::ContextFitted`] of step `step` comes with the answer, for the run to emit.
    pub(crate) async fn fit(
        &mut self,
        to: FitTarget<'_>,
        history: &History,
        partial: &str,
        final_only: bool,
        overflow: Option<ContextOverflow>,
        step: u32,
    ) -> (Fit, Option<Event>) {
        let policy = to.policy;
        let asked = to.max_tokens;
        if let Some(named) = overflow.and_then(|o| o.window)
            && policy.fits()
        {
            // The server said its window: the rest of the run fits to it.
            self.window = Some(self.window.map_or(named, |w| w.min(named)));
        }
        if let (Some(r), Some(sent)) = (overflow.and_then(|o| o.requested), self.sent_count)
            && r > sent
        {
            // The server counted more than its tokenizer said of the same prompt: trust its
            // tokenizer only that much from now on.
            let scale = r as f64 / sent.max(1) as f64;
            self.count_scale = self.count_scale.max(scale);
        }
        self.sent_count = None;
        let window = self.window.filter(|_| policy.fits());
        let Some(window) = window else {
            let fit = match overflow {
                Some(_) => Fit::Full {
                    final_fits: false,
                    why: "the server refused the prompt as longer than its context window, whose size it did not say".into(),
                },
                None => Fit::Ready(PreparedRequest {
                    prompt: None,
                    max_tokens: asked,
                }),
            };
            return (fit, None);
        };
        let note = self.final_only;
        let budget = u64::from(asked.unwrap_or(policy.min_turn_tokens));
        let mut margin = u64::from(policy.margin_tokens);
        if overflow.is_some() {
            margin = margin * 4 + window / 10;
        }
        let bytes = history.bytes(partial);
        let mut tokens = self.estimator.estimate(bytes);
        if let Some(r) = overflow.and_then(|o| o.requested)
            && r > tokens
        {
            // The server counted more than estimated: learn from it.
            self.estimator.observe(bytes, r);
            tokens = r;
        }
        let mut counted = false;
        if (tokens + budget + margin) * NEAR.1 >= window * NEAR.0
            && let Some(c) = self
                .count(to.model, &history.prompt_now(partial), bytes)
                .await
        {
            tokens = c;
            counted = true;
        }
        if note {
            tokens += self.estimator.tokens_of(FINAL_NOTE.len() as u64 + 2);
        }
        if tokens + budget + margin <= window && !note {
            self.sent_count = counted.then_some(tokens);
            let fit = Fit::Ready(PreparedRequest {
                prompt: None,
                max_tokens: asked,
            });
            return (fit, None);
        }
        // A budget asked below the floor is the floor.
        let floor = u64::from(if final_only {
            policy.final_tokens
        } else {
            policy.min_turn_tokens
        })
        .min(budget);
        // Leave out what loses least until prompt, budget and margin fit; what the model read
        // last only until a turn of the floor's size fits (the budget shrinks before it is cut
        // deeper). When the server counted, it counts the fitted prompt too, and a second pass
        // cuts what the estimate of the savings missed.
        let target = window.saturating_sub(margin + budget);
        let floor_target = window.saturating_sub(margin + floor);
        let estimator = self.estimator;
        let mut short = tokens.saturating_sub(target);
        let mut short_last = tokens.saturating_sub(floor_target);
        let bytes_of = |t: u64| usize::try_from(estimator.bytes_of(t)).unwrap_or(usize::MAX);
        let mut pass = 0;
        let (report, prompt, after) = loop {
            pass += 1;
            let fitted = fit_messages_within(
                history.messages(),
                bytes_of(short),
                bytes_of(short_last),
                policy.keep_last_steps,
            );
            let mut messages = fitted.messages;
            if note {
                final_turn::add_note(&mut messages);
            }
            let prompt = history.prompt_from(messages, partial);
            let saved = (fitted.saved as f64 / estimator.bytes_per_token()).floor() as u64;
            let mut after = tokens.saturating_sub(saved);
            if counted
                && !fitted.report.is_empty()
                && let Some(c) = self.count(to.model, &prompt, prompt_bytes(&prompt)).await
            {
                after = c;
                if after > target && pass < 2 {
                    short += after - target;
                    short_last += after.saturating_sub(floor_target);
                    continue;
                }
            }
            break (fitted.report, prompt, after);
        };
        let room = window.saturating_sub(margin + after);
        if room < floor {
            let fit = Fit::Full {
                final_fits: !final_only && room >= u64::from(policy.final_tokens),
                why: format!(
                    "the context window of {window} tokens is full: the prompt takes {after} tokens after fitting, which leaves {room} for a turn"
                ),
            };
            return (fit, None);
        }
        let max_tokens = if room >= budget {
            asked
        } else {
            Some(u32::try_from(room).unwrap_or(u32::MAX))
        };
        let fitted = Event::ContextFitted {
            step,
            window,
            tokens_before: tokens,
            tokens_after: after,
            counted,
            observations_cut: report.observations_cut,
            steps_summarised: report.steps_summarised,
            max_tokens,
            final_only: note,
            after_refusal: overflow.is_some(),
        };
        self.sent_count = counted.then_some(after);
        let untouched = report.is_empty() && !note;
        let fit = Fit::Ready(PreparedRequest {
            prompt: (!untouched).then_some(prompt),
            max_tokens,
        });
        (fit, Some(fitted))
    }

    /// The server's count of `prompt` (`bytes` in size), when it can tell, raised by
    /// [`ContextState::count_scale`]; it calibrates the estimate too. A server that cannot, or
    /// fails to, leaves the estimate in charge.
    async fn count(&mut self, model: &dyn Model, prompt: &Prompt, bytes: u64) -> Option<u64> {
        match model.count_tokens(prompt).await {
            Ok(Some(n)) => {
                let n = (n as f64 * self.count_scale).ceil() as u64;
                self.estimator.observe(bytes, n);
                Some(n)
            }
            Ok(None) => None,
            Err(e) => {
                debug!(error = %Outside(&e), "the server could not count the prompt's tokens: estimating");
                None
            }
        }
    }
}
