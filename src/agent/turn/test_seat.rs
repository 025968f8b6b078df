//! The engine's seat in its tests: requests answered from a list, what was asked written down.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{Fitted, Seat, Stage, Unanswered};
use crate::llm::{
    Api, ContextOverflow, DeltaSink, LlmError, Model, TurnFuture, TurnRequest, TurnResult,
};

/// A model that only says whether it continues an assistant message (the seat asks, not it);
/// like the real client, it stops doing so for good once a server refused.
#[derive(Debug)]
pub(super) struct Upstream {
    pub(super) prefill: AtomicBool,
}

impl Model for Upstream {
    fn turn<'a>(&'a self, _: &'a TurnRequest, _: DeltaSink<'a>) -> TurnFuture<'a> {
        unreachable!("the test seat answers itself")
    }
    fn supports_prefill(&self) -> bool {
        self.prefill.load(Ordering::Relaxed)
    }
    fn describe(&self) -> String {
        "test".into()
    }
}

/// A seat whose requests are answered from `answers`, in order.
pub(super) struct ListSeat {
    pub(super) model: Upstream,
    pub(super) api: Api,
    pub(super) answers: VecDeque<Result<TurnResult, LlmError>>,
    /// Each request: its stage and what the prompt ended in.
    pub(super) asked: Vec<(Stage, String)>,
    /// Each fitting: whether it followed a refusal as too long.
    pub(super) fitted: Vec<bool>,
    /// The fitting after the first finds no room.
    pub(super) full_after_first: bool,
    pub(super) closed: Vec<String>,
}

impl ListSeat {
    pub(super) fn new(answers: Vec<Result<TurnResult, LlmError>>) -> Self {
        ListSeat {
            model: Upstream {
                prefill: AtomicBool::new(true),
            },
            api: Api::Chat,
            answers: answers.into(),
            asked: Vec::new(),
            fitted: Vec::new(),
            full_after_first: false,
            closed: Vec::new(),
        }
    }
}

impl Seat for ListSeat {
    type Prepared = ();
    type Stop = Infallible;
    fn upstream(&self) -> (&dyn Model, Api) {
        (&self.model, self.api)
    }
    fn fits(&self) -> bool {
        true
    }
    async fn fit(
        &mut self,
        _: &str,
        overflow: Option<ContextOverflow>,
    ) -> Result<Fitted<()>, Infallible> {
        self.fitted.push(overflow.is_some());
        if self.full_after_first && self.fitted.len() > 1 {
            return Ok(Fitted::Full {
                final_fits: true,
                why: "no room".into(),
            });
        }
        Ok(Fitted::Ready(()))
    }
    async fn ask(
        &mut self,
        (): (),
        stage: Stage,
        partial: &str,
    ) -> Result<TurnResult, Unanswered<Infallible>> {
        self.asked.push((stage, partial.to_string()));
        match self.answers.pop_front() {
            Some(Err(e)) if e.to_string().contains("prefill") => {
                self.model.prefill.store(false, Ordering::Relaxed);
                Err(Unanswered::Failed(e))
            }
            Some(answer) => answer.map_err(Unanswered::Failed),
            None => panic!("asked more often than the test answers"),
        }
    }
    fn turn_text(&self, generated: &str) -> String {
        generated.to_string()
    }
    fn tool_names(&self) -> Vec<&str> {
        vec!["get_weather"]
    }
    fn refitting(&mut self, _: &LlmError) {}
    fn thought_closed(&mut self, cut: &str, _: &'static str) {
        self.closed.push(cut.to_string());
    }
}
