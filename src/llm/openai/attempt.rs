//! One attempt at a turn: the body built, the request sent (a whole answer through
//! async-openai, a streamed one through `stream.rs`), the answer taken into the turn's state.

use std::time::Instant;

use super::state::TurnState;
use super::wire::WireChunk;
use super::{AttemptError, OpenAiModel};
use crate::llm::blocks::BlockWatch;
use crate::llm::repeat::RepeatGuard;
use crate::llm::{Api, Constraint, DeltaSink, TurnRequest, TurnResult};

impl OpenAiModel {
    pub(super) async fn attempt(
        &self,
        req: &TurnRequest,
        send_stops: bool,
        constraint: Constraint,
        on_delta: DeltaSink<'_>,
        started: Instant,
    ) -> Result<TurnResult, AttemptError> {
        let stream = self.cfg.stream;
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
        if stream {
            let body = self.body_bytes(req, &fields)?;
            self.stream(body, &mut state, &mut *on_delta).await?;
        } else {
            let body = self.whole_body(req, fields);
            let answer = match self.cfg.api {
                Api::Chat => self.client.chat().create_byot::<_, WireChunk>(&body).await,
                Api::Completions => {
                    self.client
                        .completions()
                        .create_byot::<_, WireChunk>(&body)
                        .await
                }
            };
            let chunk = answer.map_err(|e| self.convert(e))?;
            state
                .absorb(chunk, &self.base_url, &mut *on_delta)
                .map_err(|e| AttemptError::from(e.redacted(&self.redactor)))?;
        }
        let mut result = state
            .finish(send_stops.then_some(req.stop.as_slice()), &self.base_url)
            .map_err(AttemptError::from)?;
        result.constraint = constraint;
        Ok(result)
    }
}
