//! One run, as an explicit state machine: think → act → observe, until a final answer is accepted
//! or the run has to stop.
//!
//! Read it top to bottom: [`Run::execute`] is the loop; [`Run::think`] is one model turn with its
//! continuations; [`Run::decide`] reads the turn; [`Run::act`] binds and runs the tool;
//! [`Run::observe`] sends the one observation that goes back to the model.

use std::time::Instant;

use serde_json::{Map, Value};
use tracing::{Instrument, debug, info_span, warn};

use crate::llm::{Finish, LlmError, TurnRequest, Usage};
use crate::protocol::{self, Call, STOP_SEQUENCES, Tag, Turn, TurnKind};

use super::events::Event;
use super::finalcheck::{self, Verdict};
use super::history::History;
use super::loopguard::{CallKey, Check, LoopGuard};
use super::{Agent, Outcome, RunOptions, Status};

/// The longest parse-error or binding message passed to the model.
const MAX_ERROR_MESSAGE: usize = 1_000;

/// What one model turn gave, continuations joined.
struct ModelTurn {
    /// The turn as the reader sees it.
    text: String,
    /// Why the last request of the turn ended.
    finish: Finish,
    /// Where the action's body starts when the turn was continued inside one of its strings: the
    /// body then runs to the end of the turn (the stop strings inside it are content).
    action_start: Option<usize>,
}

/// What the loop does after reading a turn.
enum Next {
    /// Send this observation and take another step.
    Observe(String),
    /// The run is over.
    Stop(Status, Option<Value>, Option<String>),
}

/// The state of one run.
pub(crate) struct Run<'a> {
    agent: &'a Agent,
    task: String,
    options: RunOptions,
    history: Option<History>,
    steps: u32,
    step_limit: u32,
    llm_calls: u32,
    requests: u32,
    tools_used: Vec<String>,
    usage: Usage,
    refusals: u32,
    guard: LoopGuard,
    session: Option<String>,
    transcript_failed: bool,
}

impl<'a> Run<'a> {
    pub(crate) fn new(agent: &'a Agent, task: &str, options: RunOptions) -> Self {
        let session = options.transcript.as_ref().map(|t| t.id().to_string());
        Run {
            agent,
            task: task.to_string(),
            options,
            history: None,
            steps: 0,
            step_limit: agent.config.max_steps,
            llm_calls: 0,
            requests: 0,
            tools_used: Vec::new(),
            usage: Usage::default(),
            refusals: 0,
            guard: LoopGuard::default(),
            session,
            transcript_failed: false,
        }
    }

    /// Run to the end.
    pub(crate) async fn execute(mut self) -> Outcome {
        let span = info_span!("run", session = self.session.as_deref().unwrap_or(""));
        async move {
            let (status, final_answer, error) = match self.start() {
                Ok(()) => self.steps_loop().await,
                Err(e) => (Status::Error, None, Some(e)),
            };
            self.finish(status, final_answer, error)
        }
        .instrument(span)
        .await
    }

    /// Set up the history: fresh from the task, or restored from a transcript.
    fn start(&mut self) -> Result<(), String> {
        let agent = self.agent;
        let resume = self.options.resume.take();
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
        });
        match resume {
            None => {
                let question = agent
                    .templates
                    .question(&self.task, &self.options.context)
                    .map_err(|e| e.to_string())?;
                let history = History::start(
                    agent.config.api,
                    &agent.templates,
                    &agent.system_input(),
                    &agent.system,
                    &question,
                )
                .map_err(|e| e.to_string())?;
                for m in history.messages() {
                    self.emit(Event::Message { message: m.clone() });
                }
                self.history = Some(history);
            }
            Some(r) => {
                self.steps = r.steps;
                self.llm_calls = r.llm_calls;
                self.requests = r.requests;
                self.tools_used = r.tools_used;
                self.usage = r.usage;
                let mut history = History::restore(
                    agent.config.api,
                    &agent.templates,
                    &agent.system_input(),
                    r.messages,
                )
                .map_err(|e| e.to_string())?;
                // The restored messages are already in the transcript: show them to the caller only.
                if let Some(sink) = &self.options.events {
                    for m in history.messages() {
                        sink(&Event::Message { message: m.clone() });
                    }
                }
                if let Some(msg) = r.message {
                    // A follow-up gets a fresh step budget.
                    self.step_limit = self.steps + agent.config.max_steps;
                    let q = agent
                        .templates
                        .question(&msg, &[])
                        .map_err(|e| e.to_string())?;
                    history.push_user(&q);
                    self.emit(Event::Message {
                        message: crate::llm::Message::new(crate::llm::Role::User, q),
                    });
                }
                self.history = Some(history);
            }
        }
        Ok(())
    }

    /// The loop: one iteration per step, plus the last-chance turn at the step limit.
    async fn steps_loop(&mut self) -> (Status, Option<Value>, Option<String>) {
        loop {
            let final_only = self.steps >= self.step_limit;
            let step = self.steps + 1;
            let next = async {
                // THINK
                self.emit(Event::TurnStarted { step, final_only });
                let turn = match self.think().await {
                    Ok(t) => t,
                    Err(e) => return Next::Stop(Status::Error, None, Some(e.to_string())),
                };
                // DECIDE, and ACT when the turn asks for a tool
                self.decide(turn, final_only).await
            }
            .instrument(info_span!("step", n = step))
            .await;
            match next {
                Next::Stop(status, value, error) => return (status, value, error),
                Next::Observe(obs) => self.observe(obs),
            }
        }
    }

    /// One model turn, continued while a stop string fired inside an open string of an action or
    /// an open `<think>` block.
    async fn think(&mut self) -> Result<ModelTurn, LlmError> {
        let Some(history) = self.history.take() else {
            return Err(LlmError::Other("the run has no history".into()));
        };
        let result = self.think_with(&history).await;
        self.history = Some(history);
        result
    }

    async fn think_with(&mut self, history: &History) -> Result<ModelTurn, LlmError> {
        let agent = self.agent;
        let mut generated = String::new();
        let mut continuations = 0;
        let mut action_start: Option<usize> = None;
        self.llm_calls += 1;
        loop {
            let prompt = if generated.is_empty() {
                history.prompt()
            } else {
                history.prompt_with_partial(&generated)
            };
            let request = TurnRequest {
                prompt,
                stop: STOP_SEQUENCES.iter().map(|s| s.to_string()).collect(),
                temperature: agent.config.temperature,
                max_tokens: agent.config.max_tokens,
                seed: agent.config.seed,
                keep_repetitions: agent.config.keep_repetitions,
                extra: agent.config.extra.clone(),
            };
            let sink = self.options.events.clone();
            let mut on_delta = |d: &str| {
                if let Some(sink) = &sink {
                    sink(&Event::TextDelta {
                        text: d.to_string(),
                    });
                }
            };
            let started = Instant::now();
            let result = agent.model.turn(&request, &mut on_delta).await?;
            self.requests += 1;
            self.usage.add(result.usage);
            generated.push_str(&result.text);
            self.emit(Event::TurnFinished {
                text: result.text.clone(),
                finish: result.finish.clone(),
                usage: result.usage,
                elapsed_ms: started.elapsed().as_millis() as u64,
            });
            let text = history.turn_text(&generated);
            if let Finish::Stop(stop) = &result.finish {
                let can_continue = agent.config.api == crate::agent::Api::Completions
                    || agent.model.supports_prefill();
                if can_continue
                    && continuations < agent.config.max_continuations
                    && let Some(inside) = stopped_inside(&text, action_start)
                {
                    debug!(stop = %stop, "stop string inside an open string or <think>: continuing the turn");
                    if let Inside::ActionString(start) = inside {
                        action_start = Some(start);
                    }
                    generated.push_str(stop);
                    continuations += 1;
                    continue;
                }
            }
            return Ok(ModelTurn {
                text,
                finish: result.finish,
                action_start,
            });
        }
    }

    /// Read the turn and decide what happens next.
    async fn decide(&mut self, model_turn: ModelTurn, final_only: bool) -> Next {
        if model_turn.finish == Finish::Repeated {
            return self.repeated(&model_turn.text, final_only);
        }
        let mut turn = protocol::read_turn(&model_turn.text);
        if let Some(start) = model_turn.action_start {
            continued_action(&mut turn, &model_turn.text, start);
        }
        self.keep_turn(&model_turn.text, &turn);
        if let Some(t) = &turn.thought {
            self.emit(Event::Thought { text: t.clone() });
        }
        let mut notes = Vec::new();
        if turn.discarded.is_some() {
            notes.push(
                "Note: everything after your first complete action or final answer was ignored. Write one action or one final answer per turn, then stop: observations come only from the runtime.".to_string(),
            );
        }

        if final_only {
            return self.last_chance(&turn);
        }

        match turn.kind {
            TurnKind::Final => {
                let text = turn.final_text.clone().unwrap_or_default();
                match finalcheck::check(&text, &self.agent.role) {
                    Verdict::Accepted { value, warnings } => {
                        self.emit(Event::Final {
                            value: value.clone(),
                            warnings,
                        });
                        Next::Stop(Status::Ok, Some(value), None)
                    }
                    Verdict::Refused(why) => {
                        self.guard.clear_block();
                        self.refusals += 1;
                        let kind = if text.trim().is_empty() {
                            "empty_final"
                        } else {
                            "invalid_final"
                        };
                        self.correction(kind, &why);
                        if self.refusals >= self.agent.config.max_refusals {
                            return Next::Stop(
                                Status::InvalidFinal,
                                None,
                                Some(format!(
                                    "{} final answers in a row were refused; the last: {why}",
                                    self.refusals
                                )),
                            );
                        }
                        notes.insert(0, why);
                        Next::Observe(notes.join("\n\n"))
                    }
                }
            }
            TurnKind::None => {
                self.steps += 1;
                self.refusals = 0;
                let msg = if model_turn.finish == Finish::Length {
                    "Your turn was cut off by the token limit before it finished; this is not a format error. Keep the thought short and write the <action> or <final_answer> sooner."
                } else {
                    "Your turn had neither an action nor a final answer. Write a short thought, then either one action that calls a tool, or your final answer, each in its tags as the system prompt shows."
                };
                let kind = if model_turn.finish == Finish::Length {
                    "truncated"
                } else {
                    "no_decision"
                };
                self.correction(kind, msg);
                notes.insert(0, msg.to_string());
                Next::Observe(notes.join("\n\n"))
            }
            TurnKind::Action => {
                self.steps += 1;
                self.refusals = 0;
                let body = self.act(&turn, &model_turn.finish).await;
                match body {
                    Ok(obs) => {
                        notes.insert(0, obs);
                        Next::Observe(notes.join("\n\n"))
                    }
                    Err(stop) => stop,
                }
            }
        }
    }

    /// Parse, bind, check for loops and run the tool. `Ok` is the observation text; `Err` ends the run.
    async fn act(&mut self, turn: &Turn, finish: &Finish) -> Result<String, Next> {
        let action_text = turn.action.as_deref().unwrap_or_default();
        let tools = &self.agent.tools;
        let accept = |c: &Call| {
            tools
                .get(&c.tool)
                .is_some_and(|t| protocol::bind(&c.args, t.parameters()).is_ok())
        };
        let call = match protocol::parse_action_with(action_text, &accept) {
            Ok(c) => c,
            Err(e) => {
                self.guard.clear_block();
                let mut msg = format!(
                    "Your action could not be parsed: {} (at byte {} of the action text). Write exactly one call like tool_name(arg=\"value\").",
                    cap(&e.message, MAX_ERROR_MESSAGE),
                    e.offset
                );
                if e.open_string {
                    if let Finish::Stop(stop) = finish {
                        msg.push_str(&format!(
                            " The turn was cut where a string contained the stop text `{stop}`: inside strings write `<` as \\u003c so that the text does not end your turn."
                        ));
                    } else if *finish == Finish::Length {
                        msg.push_str(" The turn was cut off by the token limit inside a string; write shorter arguments.");
                    }
                }
                self.correction("parse_error", &msg);
                return Ok(msg);
            }
        };
        let Some(tool) = tools.get(&call.tool).cloned() else {
            self.guard.clear_block();
            let names = tools.names().join(", ");
            let mut msg = format!("There is no tool named `{}`.", call.tool);
            if let Some(close) = tools.closest(&call.tool) {
                msg.push_str(&format!(" Did you mean `{close}`?"));
            }
            if names.is_empty() {
                msg.push_str(" You have no tools in this task: give your final answer.");
            } else {
                msg.push_str(&format!(" The tools are: {names}."));
            }
            self.correction("unknown_tool", &msg);
            return Ok(msg);
        };
        let args = match protocol::bind(&call.args, tool.parameters()) {
            Ok(a) => a,
            Err(e) => {
                self.guard.clear_block();
                let msg = format!(
                    "The arguments of `{}` do not fit: {}",
                    call.tool,
                    cap(&e.to_string(), MAX_ERROR_MESSAGE)
                );
                self.correction("bad_arguments", &msg);
                return Ok(msg);
            }
        };
        self.emit(Event::Action {
            tool: call.tool.clone(),
            args: Value::Object(args.clone()),
        });
        let key = CallKey::new(&call.tool, &args);
        match self.guard.check(&key) {
            Check::Stop => {
                let msg = format!(
                    "the model repeated the call `{}` after being told it was a loop",
                    call.tool
                );
                return Err(Next::Stop(Status::LoopDetected, None, Some(msg)));
            }
            Check::Blocked { reason, earlier } => {
                let msg = format!(
                    "{reason} Its result was:\n{earlier}\nUse that result, try something different, or give your final answer. Repeating this call again ends the run."
                );
                self.correction("loop", &msg);
                return Ok(msg);
            }
            Check::Run => {}
        }
        let output = self.run_tool(&call.tool, tool, args).await;
        self.guard.record(key, output.clone());
        if !call.warnings.is_empty() {
            debug!(warnings = ?call.warnings, "leniencies used to read the action");
        }
        Ok(output)
    }

    /// Run a tool with its time limit; the result (or the error) as text for the model.
    async fn run_tool(
        &mut self,
        name: &str,
        tool: std::sync::Arc<dyn crate::tools::Tool>,
        args: Map<String, Value>,
    ) -> String {
        self.emit(Event::ToolStarted {
            tool: name.to_string(),
        });
        let started = Instant::now();
        let timeout = self.agent.config.tool_timeout;
        let result = tokio::time::timeout(timeout, tool.call(args))
            .instrument(info_span!("tool", name))
            .await;
        let (ok, refused, mut text) = match result {
            Ok(Ok(out)) => (
                true,
                false,
                protocol::truncate(&out, self.agent.config.observation_limit).into_owned(),
            ),
            Ok(Err(e)) => (
                false,
                matches!(e, crate::tools::ToolError::Refused(_)),
                format!(
                    "Error from {name}: {}",
                    cap(&e.to_string(), self.agent.config.observation_limit)
                ),
            ),
            Err(_) => (
                false,
                false,
                format!(
                    "Error from {name}: timed out after {} s",
                    timeout.as_secs_f32()
                ),
            ),
        };
        // A secret the caller named (the API key) never reaches the model, the events or the transcript.
        for secret in self.agent.config.secrets.iter().filter(|s| s.len() >= 4) {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), "[redacted]");
            }
        }
        // A refused call (outside the workspace, declined by the user) did not run: it is not a tool used.
        if !refused && !self.tools_used.iter().any(|t| t == name) {
            self.tools_used.push(name.to_string());
        }
        self.emit(Event::ToolFinished {
            tool: name.to_string(),
            ok,
            elapsed_ms: started.elapsed().as_millis() as u64,
        });
        text
    }

    /// The turn after the step limit: only a final answer is accepted.
    fn last_chance(&mut self, turn: &Turn) -> Next {
        let reason = format!("the step limit of {} steps was reached", self.step_limit);
        if turn.kind != TurnKind::Final {
            self.correction(
                "final_only",
                "No final answer was given after the step limit.",
            );
            return Next::Stop(Status::MaxSteps, None, Some(reason));
        }
        match finalcheck::check(
            turn.final_text.as_deref().unwrap_or_default(),
            &self.agent.role,
        ) {
            Verdict::Accepted { value, warnings } => {
                self.emit(Event::Final {
                    value: value.clone(),
                    warnings,
                });
                Next::Stop(Status::MaxSteps, Some(value), Some(reason))
            }
            Verdict::Refused(why) => {
                self.correction("invalid_final", &why);
                Next::Stop(
                    Status::MaxSteps,
                    None,
                    Some(format!("{reason}; the last answer was refused: {why}")),
                )
            }
        }
    }

    /// A turn the degeneration guard cut: nothing in it is run (an action in it may be cut
    /// short); the history keeps what was written up to the first repetition, and the model is
    /// told plainly what happened.
    fn repeated(&mut self, text: &str, final_only: bool) -> Next {
        let kept = text.trim_end().to_string();
        if let Some(h) = self.history.as_mut() {
            h.push_turn(&kept);
        }
        self.emit(Event::Message {
            message: crate::llm::Message::new(crate::llm::Role::Assistant, kept),
        });
        if final_only {
            return self.last_chance(&protocol::read_turn(""));
        }
        self.steps += 1;
        self.refusals = 0;
        let msg = "Your turn was cut off because it kept repeating the same text over and over; nothing in it was run. Do not repeat yourself: write one short thought, then one action or your final answer.";
        self.correction("repetition", msg);
        Next::Observe(msg.to_string())
    }

    /// Put the kept part of a turn into the history (the closing tag a stop removed restored).
    fn keep_turn(&mut self, text: &str, turn: &Turn) {
        let end = turn.history_end.min(text.len());
        let mut kept = text.get(..end).unwrap_or(text).trim_end().to_string();
        if !turn.deciding_closed {
            match turn.kind {
                TurnKind::Action => kept.push_str("</action>"),
                TurnKind::Final => kept.push_str("</final_answer>"),
                TurnKind::None => {}
            }
        }
        if let Some(h) = self.history.as_mut() {
            h.push_turn(&kept);
        }
        self.emit(Event::Message {
            message: crate::llm::Message::new(crate::llm::Role::Assistant, kept),
        });
    }

    /// Send the one observation of this step (with the step-limit notice when the limit is reached).
    fn observe(&mut self, body: String) {
        let mut body = body.trim_end().to_string();
        let left = self.step_limit.saturating_sub(self.steps);
        if left > 0 {
            body.push_str(&format!(
                "\n\n[{left} step{} left]",
                if left == 1 { "" } else { "s" }
            ));
        }
        if self.steps >= self.step_limit {
            body.push_str(&format!(
                "\n\nYou have used all {} steps. No more tools can run: write your final answer now, the best answer you can give.",
                self.step_limit
            ));
        }
        let text = protocol::render_observation(&body, self.agent.config.observation_limit * 2);
        if let Some(h) = self.history.as_mut() {
            h.push_user(&text);
        }
        self.emit(Event::Observation { text: text.clone() });
        self.emit(Event::Message {
            message: crate::llm::Message::new(crate::llm::Role::User, text),
        });
        self.emit(Event::StepCompleted {
            steps: self.steps,
            llm_calls: self.llm_calls,
            tools_used: self.tools_used.clone(),
            usage: self.usage,
        });
    }

    fn correction(&mut self, kind: &str, message: &str) {
        self.emit(Event::Correction {
            kind: kind.to_string(),
            message: message.to_string(),
        });
    }

    /// Give an event to the caller and write it to the transcript.
    fn emit(&mut self, event: Event) {
        if let Some(sink) = &self.options.events {
            sink(&event);
        }
        if let Some(t) = self.options.transcript.as_mut()
            && !self.transcript_failed
            && let Err(e) = t.append(&event)
        {
            warn!(error = %e, "the transcript could not be written; the run goes on without it");
            self.transcript_failed = true;
        }
    }

    fn finish(
        mut self,
        status: Status,
        final_answer: Option<Value>,
        error: Option<String>,
    ) -> Outcome {
        let mut outcome = Outcome {
            status,
            final_answer,
            steps: self.steps,
            llm_calls: self.llm_calls,
            tools_used: std::mem::take(&mut self.tools_used),
            usage: self.usage,
            session: self.session.clone(),
            error,
            messages: Vec::new(),
        };
        let json = serde_json::to_value(&outcome).unwrap_or(Value::Null);
        self.emit(Event::Finished { outcome: json });
        outcome.messages = self
            .history
            .map(|h| h.messages().to_vec())
            .unwrap_or_default();
        outcome
    }
}

/// Where a stop string fired inside the turn, when it cannot have ended it.
enum Inside {
    /// Inside an open `<think>` block.
    Think,
    /// Inside an open string of the action whose body starts at this offset.
    ActionString(usize),
}

/// Whether a stop string fired where it cannot have ended the turn: inside an open `<think>`
/// block, or inside an open string of the deciding action. `action_start` is known once the
/// turn has been continued inside the action: its body then runs to the end of the text.
fn stopped_inside(text: &str, action_start: Option<usize>) -> Option<Inside> {
    let open_string =
        |body: &str| matches!(protocol::parse_action(body.trim()), Err(e) if e.open_string);
    if let Some(start) = action_start {
        return open_string(text.get(start..).unwrap_or_default())
            .then_some(Inside::ActionString(start));
    }
    let turn = protocol::read_turn(text);
    if turn.blocks.iter().any(|b| b.tag == Tag::Think && !b.closed) {
        return Some(Inside::Think);
    }
    if turn.kind != TurnKind::Action || turn.deciding_closed {
        return None;
    }
    let block = turn
        .blocks
        .iter()
        .rev()
        .find(|b| b.tag == Tag::Action && !b.closed)?;
    open_string(text.get(block.body.start..).unwrap_or_default())
        .then_some(Inside::ActionString(block.body.start))
}

/// After a continuation inside an action string, the action's body is everything from its start
/// to the end of the turn: the stop strings inside it are content, and the last stop removed the
/// real closing tag (put back in the history).
fn continued_action(turn: &mut Turn, text: &str, start: usize) {
    let body = text.get(start..).unwrap_or_default();
    turn.kind = TurnKind::Action;
    turn.action = Some(body.trim().to_string());
    turn.action_offset = Some(start + (body.len() - body.trim_start().len()));
    turn.final_text = None;
    turn.discarded = None;
    turn.history_end = text.len();
    turn.deciding_closed = false;
}

fn cap(s: &str, max: usize) -> String {
    protocol::truncate(s, max).into_owned()
}
