//! Context fitting: every request fits the model's context window, and the run says what it
//! left out (issue 23).
//!
//! A run learns the window once ([`Model::context_window`](crate::llm::Model::context_window),
//! after `prepare`). Before every request it estimates the prompt's tokens ([`TokenEstimator`],
//! calibrated by the counts the server reports) and asks the server's tokenizer only when the
//! estimate comes near the window, so a run far from its window makes no extra request. When the
//! prompt, the turn's token budget and a margin would not fit, the history sent is shortened
//! ([`fit_messages`]: long old observations first, then whole old steps), then the turn's budget
//! shrinks, down to a floor ([`ContextPolicy`]); below it one final-answer-only turn if it fits,
//! then the run ends with `context_exceeded`. A server that still refuses the prompt as too long
//! gets one retry, fitted harder. Each fitting is an
//! [`Event::ContextFitted`](crate::agent::Event::ContextFitted); the run's history and its
//! transcript stay whole, so `continue` and `replay` see everything.

mod count;
mod final_turn;
mod fit;
mod marker;
mod policy;
mod request;

pub use count::{TokenEstimator, prompt_bytes};
pub use final_turn::FINAL_NOTE;
pub use fit::{FitReport, Fitted, fit_messages, fit_messages_within};
pub use policy::{ContextMode, ContextPolicy};

pub(crate) use count::message_bytes;
pub(crate) use request::{ContextState, Fit, FitTarget, PreparedRequest};
