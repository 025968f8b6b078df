//! The state of one attempt: text through the stop scanner and the degeneration guard, usage,
//! reasoning, and at the end why the turn finished (including which stop a server that strips
//! stops stopped at).
//!
//! # The byte cap of a turn
//!
//! A server that runs on (it ignores the token limit, or none was set) would make the turn, the
//! transcript and the next request grow without end. What one turn keeps (text and reasoning
//! together) is capped at [`BYTES_PER_TOKEN`] bytes per token of the turn's budget, or at
//! [`MAX_TURN_BYTES`] when the turn has no budget. At the cap the stream is dropped, as at a
//! stop, and the turn ends as [`Finish::Length`]: the model is told it ran out of room.

use super::wire::*;

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::llm::{ContextOverflow, DeltaSink, Enforcer, Finish, LlmError, TurnResult, Usage};
use crate::policy::{RepeatGuard, Repetition, RepetitionKind};
use crate::scan::BlockWatch;
use crate::scan::StopScanner;

/// Bytes kept per token of a turn's budget: a token is a few bytes of text (4 on average in
/// English, up to about 16 for the longest tokens of common vocabularies).
pub(super) const BYTES_PER_TOKEN: usize = 16;

/// Bytes kept for a turn without a budget (`--max-tokens 0`): a million tokens or so, more
/// than any model writes in one turn.
pub(super) const MAX_TURN_BYTES: usize = 4 << 20;

/// Accumulates one attempt's answer.
pub(super) struct TurnState {
    pub(super) scanner: StopScanner,
    pub(super) reasoning: String,
    pub(super) usage: Usage,
    pub(super) finish_reason: Option<String>,
    pub(super) stop_reason: Option<Value>,
    pub(super) saw_choice: bool,
    pub(super) received: usize,
    pub(super) emitted: bool,
    pub(super) started: Instant,
    pub(super) first_token: Option<Duration>,
    /// The degeneration guard, when the request did not turn it off.
    pub(super) guard: Option<RepeatGuard>,
    /// The repetition the guard found; the turn ends there.
    pub(super) repeated: Option<Repetition>,
    /// The watch for a repeated block, when the request asks for one.
    pub(super) blocks: Option<BlockWatch>,
    /// Where a repeated block cut the text; the turn ends there.
    block_cut: Option<usize>,
    /// Bytes of text and reasoning the turn may keep.
    cap: usize,
    /// Bytes of text and reasoning kept so far.
    kept: usize,
    /// The cap was reached: the turn ends as [`Finish::Length`].
    capped: bool,
}

impl TurnState {
    /// The byte cap of a turn with this token budget (see the module docs).
    pub(super) fn cap_for(max_tokens: Option<u32>) -> usize {
        match max_tokens {
            Some(n) if n > 0 => (n as usize)
                .saturating_mul(BYTES_PER_TOKEN)
                .min(MAX_TURN_BYTES),
            _ => MAX_TURN_BYTES,
        }
    }

    pub(super) fn new(
        stops: &[String],
        started: Instant,
        guard: Option<RepeatGuard>,
        cap: usize,
    ) -> Self {
        TurnState {
            cap,
            kept: 0,
            capped: false,
            guard,
            repeated: None,
            blocks: None,
            block_cut: None,
            scanner: StopScanner::new(stops),
            reasoning: String::new(),
            usage: Usage::default(),
            finish_reason: None,
            stop_reason: None,
            saw_choice: false,
            received: 0,
            emitted: false,
            started,
            first_token: None,
        }
    }

    pub(super) fn absorb(
        &mut self,
        chunk: WireChunk,
        url: &str,
        on_delta: DeltaSink<'_>,
    ) -> Result<(), LlmError> {
        if let Some(err) = chunk.error.filter(|e| !e.is_null()) {
            let message = match &err {
                Value::String(s) => s.clone(),
                other => other
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| other.to_string(), str::to_owned),
            };
            // A server that only finds out once the stream has begun (or that streams its
            // errors) says it here: the same refusal as a 400's.
            if let Some(overflow) = ContextOverflow::from_value(&err) {
                return Err(LlmError::ContextOverflow {
                    status: None,
                    url: url.to_owned(),
                    overflow,
                    message,
                });
            }
            return Err(LlmError::Server {
                url: url.to_owned(),
                message,
            });
        }
        if let Some(u) = chunk.usage {
            self.usage = Usage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
            };
        }
        let Some(choice) = chunk.choices.into_iter().find(|c| c.index == 0) else {
            return Ok(());
        };
        self.saw_choice = true;
        let (content, reasoning) = match (choice.delta, choice.message) {
            (Some(m), _) | (None, Some(m)) => (m.content, m.reasoning_content.or(m.reasoning)),
            (None, None) => (None, None),
        };
        if let Some(r) = reasoning.or(choice.reasoning_content) {
            let r = self.within_cap(&r);
            self.reasoning.push_str(r);
        }
        if let Some(fr) = choice.finish_reason.filter(|f| !f.is_empty()) {
            self.finish_reason = Some(fr);
        }
        if choice.stop_reason.as_ref().is_some_and(|v| !v.is_null()) {
            self.stop_reason = choice.stop_reason;
        }
        let text = content.or(choice.text).unwrap_or_default();
        self.absorb_text(&text, on_delta);
        Ok(())
    }

    /// Whether the turn is over before the server ends it: a stop string seen, a repetition,
    /// the byte cap reached.
    pub(super) fn is_over(&self) -> bool {
        self.scanner.is_stopped()
            || self.repeated.is_some()
            || self.block_cut.is_some()
            || self.capped
    }

    /// What ended the turn before the server did, for the notice of a cut stream.
    pub(super) fn over_why(&self) -> &'static str {
        if self.capped {
            "the turn's byte cap"
        } else if self.repeated.is_some() {
            "a repetition"
        } else if self.block_cut.is_some() {
            "a repeated block"
        } else {
            "a stop string"
        }
    }

    /// The stop string that ended the turn, when nothing else did.
    pub(super) fn over_at_stop(&self) -> Option<&str> {
        if self.capped || self.repeated.is_some() || self.block_cut.is_some() {
            return None;
        }
        self.scanner.stopped()
    }

    /// Take the usage count of an event read after the turn was over (the rest is not kept).
    pub(super) fn take_usage(&mut self, data: &str) {
        if let Ok(WireChunk { usage: Some(u), .. }) = serde_json::from_str::<WireChunk>(data) {
            self.usage = Usage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
            };
        }
    }

    /// The part of `text` that fits under the cap (whole characters), counted as kept.
    fn within_cap<'t>(&mut self, text: &'t str) -> &'t str {
        let room = self.cap - self.kept;
        let text = if text.len() > room {
            self.capped = true;
            &text[..text.floor_char_boundary(room)]
        } else {
            text
        };
        self.kept += text.len();
        text
    }

    /// Take in choice 0's text.
    fn absorb_text(&mut self, text: &str, on_delta: DeltaSink<'_>) {
        if text.is_empty() {
            return;
        }
        self.received += text.len();
        let text = self.within_cap(text);
        let safe = self.scanner.push(text);
        if !safe.is_empty() {
            self.first_token
                .get_or_insert_with(|| self.started.elapsed());
            self.emitted = true;
            on_delta(safe);
        }
        if self.repeated.is_none()
            && let Some(guard) = &mut self.guard
        {
            self.repeated = guard.check(self.scanner.text());
        }
        if self.block_cut.is_none()
            && let Some(watch) = &mut self.blocks
        {
            self.block_cut = watch.check(self.scanner.text());
        }
    }

    pub(super) fn finish(
        mut self,
        sent_stops: Option<&[String]>,
        url: &str,
    ) -> Result<TurnResult, LlmError> {
        if !self.saw_choice {
            return Err(LlmError::EmptyChoices {
                url: url.to_owned(),
            });
        }
        // A stream we cut ourselves (a stop the server ignored, a repetition) never gets the
        // server's closing count: estimate what it generated rather than report nothing.
        if self.usage.completion_tokens == 0 && self.received > 0 {
            self.usage.completion_tokens = (self.received as u64).div_ceil(4);
        }
        if let (Some(cut), Some(watch)) = (self.block_cut, &self.blocks) {
            tracing::debug!("the turn repeated a block it had written: cut before the copy");
            let finish = Finish::Stop(watch.close().to_owned());
            let mut text = self.scanner.into_text();
            text.truncate(cut);
            let reasoning = (!self.reasoning.is_empty()).then_some(self.reasoning);
            return Ok(TurnResult {
                text,
                finish,
                enforced_by: Some(Enforcer::Client),
                reasoning,
                usage: self.usage,
                elapsed: self.started.elapsed(),
                first_token: self.first_token,
                constraint: Default::default(),
            });
        }
        let (finish, enforced_by) = if let Some(stop) = self.scanner.stopped() {
            (Finish::Stop(stop.to_owned()), Some(Enforcer::Client))
        } else if let Some(rep) = self.repeated {
            match rep.kind {
                RepetitionKind::Wordless => tracing::warn!(
                    target: crate::llm::NOTICE_LOG_TARGET,
                    run = self.scanner.text().len() - rep.start,
                    "the turn ran on without a word (a count): cut after its first items"
                ),
                _ => tracing::warn!(
                    target: crate::llm::NOTICE_LOG_TARGET,
                    period = rep.period,
                    repeats = rep.repeats,
                    "the turn kept repeating itself: cut at the first repetition"
                ),
            }
            let mut text = self.scanner.into_text();
            text.truncate(rep.cut);
            let reasoning = (!self.reasoning.is_empty()).then_some(self.reasoning);
            return Ok(TurnResult {
                text,
                finish: Finish::Repeated,
                enforced_by: None,
                reasoning,
                usage: self.usage,
                elapsed: self.started.elapsed(),
                first_token: self.first_token,
                constraint: Default::default(),
            });
        } else {
            let held = self.scanner.held().to_owned();
            self.scanner.finish();
            match self.finish_reason.as_deref() {
                _ if self.capped => {
                    tracing::warn!(
                        target: crate::llm::NOTICE_LOG_TARGET,
                        cap = self.cap,
                        "the turn reached its byte cap: the stream was dropped and the turn ends as length"
                    );
                    (Finish::Length, None)
                }
                Some("length") => (Finish::Length, None),
                reason => {
                    let server_stopped =
                        sent_stops.is_some() && matches!(reason, Some("stop") | None);
                    match sent_stops.filter(|_| server_stopped).and_then(|stops| {
                        which_stop(self.scanner.text(), &held, self.stop_reason.as_ref(), stops)
                    }) {
                        Some(stop) => (Finish::Stop(stop), Some(Enforcer::Server)),
                        None => (Finish::End, None),
                    }
                }
            }
        };
        let reasoning = (!self.reasoning.is_empty()).then_some(self.reasoning);
        Ok(TurnResult {
            text: self.scanner.into_text(),
            finish,
            enforced_by,
            reasoning,
            usage: self.usage,
            elapsed: self.started.elapsed(),
            first_token: self.first_token,
            constraint: Default::default(),
        })
    }
}

/// Which of the sent stops a server that stripped it stopped at (see the module docs).
pub(super) fn which_stop(
    text: &str,
    held: &str,
    stop_reason: Option<&Value>,
    stops: &[String],
) -> Option<String> {
    if let Some(Value::String(s)) = stop_reason
        && stops.iter().any(|x| x == s)
    {
        return Some(s.clone());
    }
    if !held.is_empty()
        && let Some(s) = stops.iter().find(|s| s.starts_with(held))
    {
        return Some(s.clone());
    }
    // The closing tag of the latest unclosed element.
    let mut best: Option<(usize, &String)> = None;
    for stop in stops {
        let Some(name) = stop.strip_prefix("</").and_then(|s| s.strip_suffix('>')) else {
            continue;
        };
        // `<name` followed by `>` or a space: the name found with a `<` before it.
        let last_open = text
            .rmatch_indices(name)
            .map(|(i, _)| i)
            .filter(|&i| i > 0 && text.as_bytes()[i - 1] == b'<')
            .find(|&i| {
                matches!(
                    text.as_bytes().get(i + name.len()),
                    Some(b'>' | b' ' | b'\n' | b'\t' | b'\r')
                )
            })
            .map(|i| i - 1);
        let last_close = text.rfind(stop.as_str());
        if let Some(o) = last_open
            && last_close.is_none_or(|c| c < o)
            && best.is_none_or(|(b, _)| o > b)
        {
            best = Some((o, stop));
        }
    }
    best.map(|(_, s)| s.clone())
}
