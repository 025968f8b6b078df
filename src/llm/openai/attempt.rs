//! One attempt at a turn: the body built, the request sent on the one HTTP client (`send.rs`),
//! the answer (whole, or streamed through `stream.rs`) taken into the turn's state.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::OpenAiModel;
use super::attempt_error::AttemptError;
use super::ending::Ending;
use super::state::TurnState;
use crate::llm::{Constraint, DeltaSink, Notice, NoticeKind, Prompt, TurnRequest, TurnResult};
use crate::policy::RepeatGuard;
use crate::scan::BlockWatch;

impl OpenAiModel {
    pub(super) async fn attempt(
        &self,
        req: &TurnRequest,
        send_stops: bool,
        constraint: Constraint,
        on_delta: DeltaSink<'_>,
        started: Instant,
    ) -> Result<TurnResult, AttemptError> {
        let stream = self.streams();
        let mut fields = self.request_fields(req, send_stops, stream)?;
        if let Some(grammar) = req.grammar.as_deref() {
            self.add_grammar(&mut fields, grammar, constraint).await;
            self.use_lark(&mut fields, grammar, constraint).await;
        }
        let cap = TurnState::cap_for(req.max_tokens);
        // The strict phase is for a thought the grammar holds to one line: none if none is sent.
        let guard = RepeatGuard::for_request(req, constraint.is_constrained());
        let mut state = TurnState::new(&req.stop, started, guard, cap);
        state.blocks = req.end_at_repeated_block.as_ref().and_then(BlockWatch::new);
        let body = self.body_bytes(req, &fields)?;
        let response = self.send(body).await?;
        if stream {
            let sent = send_stops.then_some(req.stop.as_slice());
            let ending = self
                .stream(response, &mut state, &mut *on_delta, sent)
                .await?;
            if let Ending::Cut(why) = ending {
                req.notify(Notice::new(
                    NoticeKind::StreamCut,
                    format!("the server was still writing the answer: the stream was dropped at {why}, which closes its connection and stops the generation"),
                ));
            }
        } else {
            let chunk = self.whole(response).await?;
            state
                .absorb(chunk, &self.base_url, &mut *on_delta)
                .map_err(|e| AttemptError::from(e.redacted(&self.redactor)))?;
        }
        let mut result = state
            .finish(send_stops.then_some(req.stop.as_slice()), &self.base_url)
            .map_err(AttemptError::from)?;
        result.constraint = constraint;
        if result.usage.prompt_tokens == 0 {
            result.usage.prompt_tokens = self.prompt_tokens(&req.prompt).await;
        }
        Ok(result)
    }

    /// Whether turns are streamed: as configured, until the server refused it once.
    pub(super) fn streams(&self) -> bool {
        self.cfg.stream && !self.stream_rejected.load(Ordering::Relaxed)
    }

    /// The prompt's tokens when the server did not say: its count comes in its last chunk, which
    /// a stream cut before the end (a stop the server ignored, a repeated call, the byte cap)
    /// never gets, and the caller's usage would say 0. Counted by the server's tokenizer where
    /// it has one (`/tokenize`), else estimated at four bytes a token.
    async fn prompt_tokens(&self, prompt: &Prompt) -> u64 {
        match self.count(prompt).await {
            Ok(Some(n)) => n,
            Ok(None) | Err(_) => {
                let bytes: usize = match prompt {
                    Prompt::Chat(messages) => messages.iter().map(|m| m.content.len()).sum(),
                    Prompt::Text(text) => text.len(),
                };
                (bytes as u64).div_ceil(4)
            }
        }
    }
}
