//! One run: think → act → observe, until a final answer is accepted or the run has to stop.
//!
//! Read it top to bottom. [`Run::execute`] sets the history up and loops; each step is
//! [`Run::think`] (one model turn, asked through the turn engine `turn/` with `think.rs` as its seat),
//! then [`Run::decide`] (read the turn, in `decide.rs`), which acts when the turn calls a tool
//! (`act.rs`) and either gives the one observation that goes back to the model or an
//! [`Ending`]. `Run` keeps only what lives across turns; everything the loop emits goes through
//! its [`Recorder`]: to the caller's event sink and, step by step, to the transcript.

use serde_json::Value;
use tracing::{Instrument, debug, info_span};

use crate::llm::{ContextOverflow, Message, Role as MsgRole};
use crate::prompt::PromptError;
use crate::protocol;

use super::context::{ContextState, Fit, FitTarget};
use super::correction::Correction;
use super::events::Event;
use super::history::History;
use super::memory::Memory;
use super::next::{Ending, Next};
use super::plan::TurnPlan;
use super::record::Recorder;
use super::turn::TurnFailure;
use super::{Agent, Outcome, Progress, RunOptions, Status};

/// The state of one run.
pub(crate) struct Run<'a> {
    pub(super) agent: &'a Agent,
    pub(super) task: String,
    pub(super) options: RunOptions,
    pub(super) history: History,
    pub(super) progress: Progress,
    /// Model requests, continuations included (a scripted model resumes from here).
    pub(super) requests: u32,
    pub(super) step_limit: u32,
    /// What the run remembers that changes what it does: a fold over its events (`memory.rs`).
    pub(super) memory: Memory,
    /// The stop strings, kept between turns (each request takes them and gives them back).
    pub(super) stops: Vec<String>,
    /// The context window and the token estimate (see `context/`).
    pub(super) context: ContextState,
    session: Option<String>,
    /// The caller's event sink and the transcript.
    pub(super) recorder: Recorder,
}

impl<'a> Run<'a> {
    pub(crate) fn new(agent: &'a Agent, task: &str, mut options: RunOptions) -> Self {
        let session = options.transcript.as_ref().map(|t| t.id().to_string());
        let recorder = Recorder::new(options.events.take(), options.transcript.take());
        Run {
            agent,
            task: task.to_string(),
            options,
            history: History::empty(agent.config.api),
            progress: Progress::default(),
            requests: 0,
            step_limit: agent.config.max_steps,
            memory: Memory::default(),
            stops: Vec::new(),
            context: ContextState::default(),
            session,
            recorder,
        }
    }

    /// Run to the end.
    pub(crate) async fn execute(mut self) -> Outcome {
        let span = info_span!("run", session = self.session.as_deref().unwrap_or(""));
        async move {
            self.agent.model.prepare().await;
            self.context.window = self.agent.model.context_window();
            let ending = match self.start() {
                Ok(()) => self.steps().await,
                Err(e) => Ending::stop(Status::Error, e.to_string()),
            };
            self.finish(ending)
        }
        .instrument(span)
        .await
    }

    /// The loop: one iteration per turn, and the last-chance turn at the step limit. Steps are
    /// counted here and only here.
    async fn steps(&mut self) -> Ending {
        // A continued run goes on with what its transcript says the last step left.
        let mut plan = TurnPlan {
            final_only: false,
            reasoning: self.agent.config.reasoning || self.memory.reasoning,
            after_refused_call: self.memory.after_refused_call,
            after_decline: false,
        };
        loop {
            plan.final_only = self.progress.steps >= self.step_limit || self.context.final_only;
            let step = self.progress.steps + 1;
            let next = async {
                let first = match self.fit_request("", plan.final_only, None).await {
                    Fit::Ready(request) => request,
                    Fit::Full { final_fits, why } => return Next::context_full(plan, final_fits, why),
                };
                self.emit(Event::TurnStarted {
                    step,
                    final_only: plan.final_only,
                });
                let turn = match self.think(plan, first).await {
                    Ok(turn) => turn,
                    Err(TurnFailure::Model(e)) => {
                        return Next::End(Ending::stop(Status::Error, e.to_string()));
                    }
                    Err(TurnFailure::Context { final_fits, why }) => {
                        return Next::context_full(plan, final_fits, why);
                    }
                    Err(TurnFailure::Stopped(never)) => match never {},
                };
                if turn.shows_reasoning && !plan.reasoning {
                    debug!(
                        "the model reasons first: its later turns get grammars that leave reasoning free"
                    );
                    plan.reasoning = true;
                }
                self.decide(turn, plan.final_only).await
            }
            .instrument(info_span!("step", n = step))
            .await;
            plan.after_refused_call = false;
            plan.after_decline = false;
            match next {
                Next::Step {
                    observation,
                    refused_call,
                } => {
                    self.progress.steps += 1;
                    plan.after_refused_call = refused_call;
                    self.observe(observation);
                }
                Next::Refused(correction) => self.observe(correction),
                Next::Declined => (plan.after_refused_call, plan.after_decline) = (true, true),
                Next::LastTurn => self.context.final_only = true,
                Next::End(ending) => return ending,
            }
        }
    }

    /// Fit the next request into the context window ([`ContextState::fit`]), and tell what
    /// fitting left out.
    pub(super) async fn fit_request(
        &mut self,
        partial: &str,
        final_only: bool,
        overflow: Option<ContextOverflow>,
    ) -> Fit {
        let step = self.progress.steps + 1;
        let (fit, fitted) = self
            .context
            .fit(
                FitTarget::of(self.agent),
                &self.history,
                partial,
                final_only,
                overflow,
                step,
            )
            .await;
        if let Some(event) = fitted {
            self.emit(event);
        }
        fit
    }

    /// Set up the history: fresh from the task, or restored from a transcript, whose committed
    /// events rebuild the run's memory before it goes on.
    fn start(&mut self) -> Result<(), PromptError> {
        let agent = self.agent;
        let resume = self.options.resume.take();
        if let Some(r) = &resume {
            for event in &r.events {
                self.memory.apply(event);
            }
        }
        let meta = std::mem::take(&mut self.options.meta);
        self.emit(Event::RunStarted {
            session: self.session.clone().unwrap_or_default(),
            task: self.task.clone(),
            model: agent.model.describe(),
            api: agent.config.api.as_str().to_string(),
            role: agent.role.name().to_string(),
            max_steps: agent.config.max_steps,
            started: crate::session::now_rfc3339(),
            meta,
            question: resume.as_ref().and_then(|r| r.message.clone()),
        });
        let input = agent.system_input();
        let Some(r) = resume else {
            let question = agent
                .templates
                .question(&self.task, &self.options.context)?;
            self.history = History::start(
                agent.config.api,
                &agent.templates,
                &input,
                agent.system_for(self.context.window)?,
                &question,
            )?;
            for m in self.history.messages().to_vec() {
                self.emit(Event::Message { message: m });
            }
            return Ok(());
        };
        self.progress = r.progress;
        self.requests = r.requests;
        self.history = History::restore(agent.config.api, &agent.templates, &input, r.messages)?;
        // The restored messages are already in the transcript: show them to the caller only.
        if let Some(sink) = self.recorder.sink() {
            for m in self.history.messages() {
                sink(&Event::Message { message: m.clone() });
            }
        }
        if let Some(msg) = r.message {
            // A follow-up question gets a fresh step budget.
            self.step_limit = self.progress.steps + agent.config.max_steps;
            let q = agent.templates.question(&msg, &[])?;
            self.history.push_user(&q);
            self.emit(Event::Message {
                message: Message::new(MsgRole::User, q),
            });
        }
        Ok(())
    }

    /// Take an event into the run's memory, then give it to the caller and the transcript
    /// ([`Recorder::emit`]).
    pub(super) fn emit(&mut self, event: Event) {
        self.memory.apply(&event);
        self.recorder.emit(event);
    }

    /// Tell a correction as an event; the text for the model.
    pub(super) fn correct(&mut self, correction: Correction) -> String {
        let message = correction.message();
        self.emit(Event::Correction {
            kind: correction.kind().to_string(),
            message: message.clone(),
        });
        message
    }

    /// Send the one observation of this step (with the step-limit notice when the limit is reached).
    fn observe(&mut self, body: String) {
        let mut body = body.trim_end().to_string();
        let left = self.step_limit.saturating_sub(self.progress.steps);
        if left > 0 {
            body.push_str(&format!(
                "\n\n[{left} step{} left]",
                if left == 1 { "" } else { "s" }
            ));
        }
        if self.progress.steps >= self.step_limit {
            body.push_str(&format!(
                "\n\nYou have used all {} steps. No more tools can run: write your final answer now, the best answer you can give.",
                self.step_limit
            ));
        }
        let text = protocol::render_observation(&body, self.agent.config.observation_limit * 2);
        self.history.push_user(&text);
        self.emit(Event::Observation { text: text.clone() });
        self.emit(Event::Message {
            message: Message::new(MsgRole::User, text),
        });
        self.emit(Event::StepCompleted {
            progress: self.progress.clone(),
        });
    }

    fn finish(mut self, ending: Ending) -> Outcome {
        let mut outcome = Outcome {
            status: ending.status,
            final_answer: ending.answer,
            progress: std::mem::take(&mut self.progress),
            session: self.session.clone(),
            error: ending.error,
            messages: Vec::new(),
        };
        let json = serde_json::to_value(&outcome).unwrap_or(Value::Null);
        self.emit(Event::Finished { outcome: json });
        outcome.messages = self.history.messages().to_vec();
        outcome
    }
}
