//! The settings of the loop, and their defaults.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::policy::Policies;
use crate::secret::Redactor;

use super::Api;
use super::context::ContextPolicy;

/// The default token limit of one model turn. A turn is a short thought and one action or
/// answer; a model that runs past this is rambling or looping, and on a CPU every token costs
/// time. Raise it (`--max-tokens`) for actions that write long files; `0` on the command line
/// sends no limit at all.
pub const DEFAULT_MAX_TOKENS: u32 = 1024;

/// Settings of the loop.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// Which endpoint, and so which prompt shape, turns use ([`Api::Chat`] by default).
    pub api: Api,
    /// Step limit (docs/protocol.md §1.6).
    pub max_steps: u32,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Token limit per turn ([`DEFAULT_MAX_TOKENS`] by default; `None` sends no limit).
    pub max_tokens: Option<u32>,
    /// Turn the degeneration guard off (see [`crate::llm::RepeatGuard`]): by default a turn that
    /// keeps repeating itself is cut at once and the model is told so.
    pub keep_repetitions: bool,
    /// Sampling seed.
    pub seed: Option<i64>,
    /// The model reasons before it answers (a `<think>` block, or reasoning the server sends
    /// apart): turn grammars leave the reasoning free. Without it, the first turn that shows
    /// reasoning switches the rest of the run over.
    pub reasoning: bool,
    /// Extra vendor fields for every request.
    pub extra: Map<String, Value>,
    /// Largest tool output passed to the model, in bytes; more is cut with a marker.
    pub observation_limit: usize,
    /// Time limit for one tool call.
    pub tool_timeout: Duration,
    /// Final answers refused in a row before the run ends with `invalid_final`.
    pub max_refusals: u32,
    /// Continuations of one turn (a stop inside an open string or `<think>`).
    pub max_continuations: u32,
    /// Environment facts for the system prompt, one line each.
    pub environment: Vec<String>,
    /// Secrets (API keys) replaced by `[redacted]` wherever a tool's output contains them, in
    /// every form the redactor knows (reversed, base64), so a tool such as `run_command("env")`
    /// cannot pass them to the model, the events or the transcript. Its `Debug` shows no key.
    pub secrets: Redactor,
    /// How requests are kept inside the model's context window (fitted, by default, whenever
    /// the window is known; see [`crate::agent::context`]).
    pub context: ContextPolicy,
    /// Judge a run's first tool call before it runs (the decision step, `--policy-off decide` turns it
    /// off): a question that names no file and whose own function (the model's guess, asked
    /// of the question alone) is not about the called tool is answered without it.
    pub decide: bool,
    /// The steering rules on (all by default; `crate::policy` lists them): the decision step,
    /// the named files' notice and refusal, the observation's header, and the guards of a
    /// constrained turn.
    pub policies: Policies,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            api: Api::Chat,
            max_steps: 10,
            temperature: None,
            max_tokens: Some(DEFAULT_MAX_TOKENS),
            keep_repetitions: false,
            seed: None,
            reasoning: false,
            extra: Map::new(),
            observation_limit: 16 * 1024,
            tool_timeout: Duration::from_secs(120),
            max_refusals: 3,
            max_continuations: 4,
            environment: Vec::new(),
            secrets: Redactor::new(),
            context: ContextPolicy::default(),
            decide: true,
            policies: Policies::all(),
        }
    }
}
