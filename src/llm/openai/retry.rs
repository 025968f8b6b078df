//! Retries: one turn as a series of attempts, with exponential backoff and jitter (`backon`'s
//! builder), `Retry-After` honoured up to its cap, and the two "ask again without it" rules (a
//! server that rejects `stop`, or the grammar field).

use std::sync::atomic::Ordering;
use std::time::Instant;

use backon::{BackoffBuilder, ExponentialBuilder};

use super::OpenAiModel;
use super::attempt_error::AttemptError;
use crate::llm::notice::quote;
use crate::llm::{
    Api, DeltaSink, LlmError, NOTICE_LOG_TARGET, Notice, NoticeKind, Prompt, Role, TurnRequest,
    TurnResult,
};
use crate::shown::Outside;

/// A request field a server refused with a 400, and the turn is asked again without.
#[derive(Debug, Clone, Copy)]
enum Refused {
    /// The grammar in llguidance's syntax: asked again in GBNF.
    Lark,
    /// The grammar: asked again without one.
    Grammar,
    /// The stop strings: asked again without them.
    Stop,
    /// Streaming: asked again for a whole answer.
    Stream,
}

impl Refused {
    /// What happened, and what happens now.
    fn words(self) -> (&'static str, &'static str) {
        match self {
            Refused::Lark => (
                "the server rejected the llguidance grammar",
                "asking again in GBNF, and sending GBNF from now on",
            ),
            Refused::Grammar => (
                "the server rejected the grammar",
                "asking again without it, and sending none from now on",
            ),
            Refused::Stop => (
                "the server rejected `stop`",
                "asking again without it (stops stay enforced on our side)",
            ),
            Refused::Stream => (
                "the server refused to stream",
                "asking again for whole answers, from now on (stops stay enforced on our side)",
            ),
        }
    }
}

impl OpenAiModel {
    /// Stop sending the field the server refused (for good, for this client), and say so.
    fn ask_without(&self, req: &TurnRequest, refused: Refused, err: &LlmError) {
        let (what, now) = refused.words();
        tracing::warn!(target: NOTICE_LOG_TARGET, model = %Outside(&self.cfg.model), error = %Outside(err), "{what}; {now}");
        let (kind, flag) = match refused {
            Refused::Lark => (NoticeKind::GrammarRejected, &self.lark_rejected),
            Refused::Grammar => (NoticeKind::GrammarRejected, &self.grammar_rejected),
            Refused::Stop => (NoticeKind::StopRejected, &self.stop_rejected),
            Refused::Stream => (NoticeKind::StreamRejected, &self.stream_rejected),
        };
        req.notify(Notice::new(kind, format!("{what} ({}); {now}", quote(err))));
        flag.store(true, Ordering::Relaxed);
    }

    /// Whether `err` is a server refusing to continue the assistant's own message (prefill: a
    /// llama.cpp too old for it under a thinking template, a server that takes no such chat).
    /// Prefill is then off for good; the caller ends the turn where it was.
    fn refuses_prefill(&self, req: &TurnRequest, err: &LlmError) -> bool {
        let continued = matches!(&req.prompt, Prompt::Chat(m) if m.last().is_some_and(|m| m.role == Role::Assistant));
        let refused = self.cfg.api == Api::Chat
            && continued
            && err.status() == Some(400)
            && err.context_overflow().is_none();
        if refused && !self.prefill_rejected.swap(true, Ordering::Relaxed) {
            tracing::warn!(target: NOTICE_LOG_TARGET, model = %Outside(&self.cfg.model), error = %Outside(err), "the server refused to continue the assistant's turn; no prefill from now on");
            req.notify(Notice::new(
                NoticeKind::PrefillRejected,
                format!("the server refused to continue the turn ({}): the turn ends where it was, and turns are not continued from now on", quote(&err)),
            ));
        }
        refused
    }

    /// The turn, retried while the failure is transient and no text was passed on (a retry
    /// never repeats deltas).
    pub(super) async fn run_turn(
        &self,
        req: &TurnRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<TurnResult, LlmError> {
        let started = Instant::now();
        let mut backoff = ExponentialBuilder::default()
            .with_min_delay(self.cfg.retry_min_delay)
            .with_max_delay(self.cfg.retry_max_delay)
            .with_max_times(self.cfg.max_retries as usize)
            .with_jitter()
            .build();
        let mut attempts: u32 = 0;
        // A kept connection found closed is asked again at once, once a turn.
        let mut resent = false;
        loop {
            attempts += 1;
            let send_stops = self.cfg.send_stop
                && !self.stop_rejected()
                && req.stop.iter().any(|s| !s.is_empty());
            let constraint = self.constraint_for(req.grammar.as_deref()).await;
            let lark = match req.grammar.as_deref() {
                Some(g) => self.sends_lark(g, constraint).await,
                None => false,
            };
            let streamed = self.streams();
            match self
                .attempt(req, send_stops, constraint, &mut *on_delta, started)
                .await
            {
                Ok(r) => return Ok(r),
                Err(AttemptError {
                    err,
                    emitted,
                    stop_rejected,
                    grammar_rejected,
                    stream_rejected,
                    closed_early,
                }) => {
                    if closed_early && !resent && !emitted {
                        tracing::debug!(error = %Outside(&err), "a kept connection was closed: sending again on a new one");
                        resent = true;
                        attempts -= 1;
                        continue;
                    }
                    let refused = if stream_rejected && streamed {
                        Some(Refused::Stream)
                    } else if grammar_rejected && lark {
                        Some(Refused::Lark)
                    } else if grammar_rejected && constraint.is_constrained() {
                        Some(Refused::Grammar)
                    } else if stop_rejected && send_stops {
                        Some(Refused::Stop)
                    } else {
                        None
                    };
                    if let Some(refused) = refused {
                        // Asked again at once, without the field: not a failed attempt.
                        self.ask_without(req, refused, &err);
                        attempts -= 1;
                        continue;
                    }
                    if self.refuses_prefill(req, &err) || emitted || !err.is_retryable() {
                        return Err(err);
                    }
                    let Some(delay) = backoff.next() else {
                        return Err(if attempts > 1 {
                            LlmError::GaveUp {
                                attempts,
                                last: Box::new(err),
                            }
                        } else {
                            err
                        });
                    };
                    let delay = err
                        .retry_after()
                        .map_or(delay, |ra| ra.min(self.cfg.retry_after_cap));
                    tracing::warn!(target: NOTICE_LOG_TARGET, attempt = attempts, delay_ms = delay.as_millis() as u64, error = %Outside(&err), "model request failed; retrying");
                    req.notify(Notice::new(
                        NoticeKind::Retry,
                        format!(
                            "model request {attempts} failed ({}); retrying in {:.1} s",
                            quote(&err),
                            delay.as_secs_f64()
                        ),
                    ));
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }
}
