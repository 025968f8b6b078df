//! The think → act → observe loop (docs/protocol.md §1.6).
//!
//! An [`Agent`] holds a model, the tools, a [`Role`] and the prompt templates. Each run is an
//! explicit state machine in `run.rs`: *think* (one model turn, continued when a stop
//! string fired inside an open string or `<think>` block), *act* (parse, bind and run the tool),
//! *observe* (render the observation with the notices that go with it). Everything the runtime says
//! to the model after the task is one `<observation>` between two model turns.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use tagloop::agent::{Agent, Role};
//! use tagloop::llm::{Script, ScriptedModel};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Answer { city: String }
//!
//! let model = Arc::new(ScriptedModel::new(Script::load("turns.script")?));
//! let agent = Agent::builder(model).role(Role::for_type::<Answer>("geographer", "")?).build()?;
//! let outcome = agent.run_as::<Answer>("Where is the Eiffel tower?").await?;
//! println!("{}", outcome.final_answer.map(|a| a.city).unwrap_or_default());
//! # Ok(()) }
//! ```

mod act;
mod builder;
mod config;
pub mod context;
pub(crate) mod correction;
mod decide;
mod error;
mod events;
pub(crate) mod finalcheck;
mod first_call;
mod grammars;
pub(crate) mod guess;
pub(crate) mod history;
mod memory;
mod next;
mod notices;
mod outcome;
mod plan;
mod preview;
mod record;
mod resume;
mod role;
mod role_errors;
mod run;
mod schema_fit;
mod think;
pub(crate) mod turn;
mod wrap;

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use builder::AgentBuilder;
pub use config::{AgentConfig, DEFAULT_MAX_TOKENS};
pub use context::{ContextMode, ContextPolicy};
pub use error::AgentError;
pub use events::{Event, EventSink};
pub use outcome::{Outcome, Progress, Status};
pub use preview::{Preview, preview, preview_grammar, preview_grammar_for};
pub use resume::{Resume, ResumeError};
pub use role::{Role, RoleError};
pub use wrap::{WrapCommand, Wrapped};

use crate::llm::{Model, Prompt};
use crate::prompt::{ContextItem, PromptError, SystemInput, Templates, ToolDoc};
use crate::session::Transcript;
use crate::tools::Registry;

use crate::llm::Api;

/// One run's inputs beyond the task.
#[derive(Default)]
pub struct RunOptions {
    /// Context from a larger workflow, rendered into the first user message.
    pub context: Vec<ContextItem>,
    /// Where events go as they happen.
    pub events: Option<EventSink>,
    /// Where the transcript is written.
    pub transcript: Option<Transcript>,
    /// Facts stored in the `run_started` record for continuing later (CLI options; never secrets).
    pub meta: Value,
    /// State restored from a transcript, to go on from the last complete step.
    pub resume: Option<Resume>,
}

/// An agent: a model, tools, a role and templates. Cheap to share; each run has its own state.
pub struct Agent {
    model: Arc<dyn Model>,
    tools: Registry,
    role: Role,
    templates: Arc<Templates>,
    config: AgentConfig,
    /// The tools as the prompts describe them.
    tool_docs: Vec<ToolDoc>,
    system: String,
    /// The system prompt's compact form, for runs at a small context window: rendered at the
    /// first such run.
    system_compact: std::sync::OnceLock<String>,
    /// The grammars turns are constrained with: built at the first turn that may send one (never
    /// for a model that takes none), then shared by every run of this agent.
    grammars: std::sync::OnceLock<grammars::Grammars>,
}

impl Agent {
    /// Start building an agent around a model.
    pub fn builder(model: Arc<dyn Model>) -> AgentBuilder {
        AgentBuilder::new(model)
    }

    /// The grammars, built on first use if the model may send them.
    fn grammars(&self) -> &grammars::Grammars {
        self.grammars.get_or_init(|| {
            if self.model.wants_grammar() {
                grammars::Grammars::build(&grammars::GrammarInputs {
                    tools: &self.tools,
                    role: &self.role,
                    api: self.config.api,
                })
            } else {
                grammars::Grammars::default()
            }
        })
    }

    /// The system prompt, rendered once when the agent was built; a continued run sends the one
    /// in its transcript instead.
    pub fn system_prompt(&self) -> &str {
        &self.system
    }

    /// The system prompt a run sends at this context window: the one rendered when the agent was
    /// built, or, when requests are fitted and the window is below the policy's
    /// `compact_prompt_below`, its compact form (one example, one line per tool), which leaves
    /// the turns more of a small window.
    pub(crate) fn system_for(&self, window: Option<u64>) -> Result<&str, PromptError> {
        let policy = self.config.context;
        let small = window.is_some_and(|w| w < policy.compact_prompt_below);
        if !small || !policy.fits() {
            return Ok(&self.system);
        }
        if let Some(s) = self.system_compact.get() {
            return Ok(s);
        }
        let rendered = self.templates.system_compact(&self.system_input())?;
        Ok(self.system_compact.get_or_init(|| rendered))
    }

    /// The settings the agent was built with (limits, grammar mode, dialects, …).
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The role whose instructions are in the system prompt and whose schema checks the answer.
    pub fn role(&self) -> &Role {
        &self.role
    }

    /// The tools the model may call, in the order the system prompt lists them.
    pub fn tools(&self) -> &Registry {
        &self.tools
    }

    /// The grammar (GBNF) a turn is constrained with on servers that take one (`tagloop prompt
    /// --show-grammar`): an ordinary step, or the last turn at the step limit (`final_only`).
    /// Built from the tools and the role whether or not this agent's model sends it.
    pub fn turn_grammar(&self, final_only: bool) -> String {
        preview_grammar(&self.tools, &self.role, &self.config, final_only)
    }

    /// Exactly what the model receives for the first turn of this task (`tagloop prompt`).
    pub fn first_prompt(&self, task: &str, context: &[ContextItem]) -> Result<Prompt, AgentError> {
        let question = self.templates.question(task, context)?;
        Ok(history::History::start(
            self.config.api,
            &self.templates,
            &self.system_input(),
            &self.system,
            &question,
        )?
        .prompt())
    }

    /// What the prompt templates are rendered from.
    pub(crate) fn system_input(&self) -> SystemInput<'_> {
        preview::system_input(&self.role, &self.tool_docs, &self.config)
    }

    /// Run a task to its end; the final answer is text, or JSON when the role has a schema.
    pub async fn run(&self, task: &str) -> Outcome {
        self.run_with(task, RunOptions::default()).await
    }

    /// Run a task with options (events, transcript, workflow context, resume).
    pub async fn run_with(&self, task: &str, options: RunOptions) -> Outcome {
        run::Run::new(self, task, options).execute().await
    }

    /// Run a task and hand the final answer back typed. With no tools this is a single-turn
    /// structured call: the model answers at once, with corrections when it does not validate.
    pub async fn run_as<T: DeserializeOwned>(&self, task: &str) -> Result<Outcome<T>, AgentError> {
        let outcome = self.run(task).await;
        decode(outcome)
    }
}

/// Convert an outcome's JSON final answer into a Rust type.
pub fn decode<T: DeserializeOwned>(outcome: Outcome<Value>) -> Result<Outcome<T>, AgentError> {
    let typed = match &outcome.final_answer {
        None => None,
        Some(v) => match serde_json::from_value::<T>(v.clone()) {
            Ok(t) => Some(t),
            Err(e) => {
                return Err(AgentError::Decode {
                    error: e,
                    outcome: Box::new(outcome),
                });
            }
        },
    };
    Ok(outcome.with_final(typed))
}
