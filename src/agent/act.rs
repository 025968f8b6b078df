//! Act: parse the action, bind its arguments to the tool, check for loops, run the tool.
//!
//! Every way an action can fail (unparseable, unknown tool, arguments that do not fit, the same
//! call again) becomes a correction the model reads; only a call repeated after the model was
//! told it is a loop ends the run. A tool's own error or time-out is an observation like any
//! result.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value};
use tracing::{Instrument, debug, info_span};

use crate::llm::Finish;
use crate::policy::{Check, Policy, tool_result};
use crate::protocol::{self, Call, Turn};
use crate::tools::{Tool, ToolError};

use super::Status;
use super::correction::Correction;
use super::events::Event;
use super::next::{Ending, Next};
use super::run::Run;

impl Run<'_> {
    /// Parse, bind, check for loops and run the tool: the step's observation (a correction when
    /// the call could not run), or the end of the run when the model loops.
    pub(super) async fn act(&mut self, turn: &Turn, finish: &Finish) -> Next {
        if let (Some(dialect), Some(error)) = (turn.dialect, &turn.dialect_error) {
            return Next::step(self.correct(Correction::Dialect {
                dialect: dialect.name(),
                error: error.clone(),
            }));
        }
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
                return Next::step(self.correct(Correction::ParseError {
                    message: e.message,
                    offset: e.offset,
                    cut: e.open_string.then(|| finish.clone()),
                }));
            }
        };
        let Some(tool) = tools.get(&call.tool).cloned() else {
            let correction = Correction::UnknownTool {
                closest: tools.closest(&call.tool).map(|c| c.to_string()),
                names: tools.names().iter().map(|n| n.to_string()).collect(),
                name: call.tool,
            };
            return Next::step(self.correct(correction));
        };
        let args = match protocol::bind(&call.args, tool.parameters()) {
            Ok(a) => a,
            Err(e) => {
                return Next::step(self.correct(Correction::BadArguments {
                    tool: call.tool,
                    error: e.to_string(),
                }));
            }
        };
        self.emit(Event::Action {
            tool: call.tool.clone(),
            args: Value::Object(args.clone()),
        });
        // The memory marks the names the call uses and asks the loop guard (`memory.rs`).
        match self.memory.take_check() {
            Check::EndRun => {
                return Next::End(Ending::stop(
                    Status::LoopDetected,
                    format!(
                        "the model repeated the call `{}` after being told it was a loop",
                        call.tool
                    ),
                ));
            }
            Check::Blocked { reason, earlier } => {
                return Next::Step {
                    observation: self.correct(Correction::Loop { reason, earlier }),
                    refused_call: true,
                };
            }
            Check::Run => {}
        }
        let (body, ok) = self.run_tool(&call.tool, tool, args).await;
        if !call.warnings.is_empty() {
            debug!(warnings = ?call.warnings, "leniencies used to read the action");
        }
        let step = self.progress.steps + 1;
        let policies = self.agent.config.policies;
        let notice = (self.memory.named.notice())
            .filter(|_| policies.on(Policy::NamedFilesNotice) && self.tools_take_names());
        // The step that reaches the limit gets the limit notice instead of the named files'
        // notice after the result.
        let mut observation = body;
        if let Some(notice) = notice.filter(|_| ok && step < self.step_limit) {
            observation = format!("{}\n\n{notice}", observation.trim_end());
        }
        // A secret the caller named (the API key) never reaches the model, the events or the transcript.
        Next::step(self.agent.config.secrets.redact_string(observation))
    }

    /// Run a tool with its time limit: the observation's body (the result, or the error, as text
    /// for the model, without the notes after it), recorded in its `ToolFinished` event, and
    /// whether it succeeded.
    async fn run_tool(
        &mut self,
        name: &str,
        tool: Arc<dyn Tool>,
        args: Map<String, Value>,
    ) -> (String, bool) {
        self.emit(Event::ToolStarted {
            tool: name.to_string(),
        });
        let started = Instant::now();
        let agent = self.agent;
        let config = &agent.config;
        let shown = args.clone();
        let call = tokio::time::timeout(config.tool_timeout, tool.call(args))
            .instrument(info_span!("tool", name));
        let mut call = std::pin::pin!(call);
        // A call that is done at once (a small file read in place) does not wait: the staged
        // records are written only before a real wait.
        let result = match futures::poll!(call.as_mut()) {
            std::task::Poll::Ready(result) => result,
            std::task::Poll::Pending => {
                self.recorder.flush();
                call.await
            }
        };
        let (ok, refused, text) = match result {
            Ok(Ok(out)) => {
                let out = protocol::truncate(&out, config.observation_limit);
                let text = if config.policies.on(Policy::ObservationHeader) {
                    tool_result(name, &shown, &out)
                } else {
                    out.trim_end().to_string()
                };
                (true, false, text)
            }
            Ok(Err(e)) => {
                let error = e.to_string();
                let own = protocol::truncate(&error, config.observation_limit);
                let text = format!("Error from {name}: {own}");
                (false, matches!(e, ToolError::Refused(_)), text)
            }
            Err(_) => {
                let own = format!("timed out after {} s", config.tool_timeout.as_secs_f32());
                (false, false, format!("Error from {name}: {own}"))
            }
        };
        // A secret the caller named (the API key) never reaches the model, the events or the transcript.
        let text = config.secrets.redact_string(text);
        // A refused call (outside the workspace, declined by the user) did not run: it is not a tool used.
        let used = &mut self.progress.tools_used;
        if !refused && !used.iter().any(|t| t == name) {
            used.push(name.to_string());
        }
        self.emit(Event::ToolFinished {
            tool: name.to_string(),
            ok,
            elapsed_ms: started.elapsed().as_millis() as u64,
            // As the observation shows it (the header with the call's own arguments, then the
            // output or the error's wording): what the loop guard shows again for a call it
            // refuses (`memory.rs`).
            result: Some(text.clone()),
        });
        (text, ok)
    }
}
