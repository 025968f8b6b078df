//! What the model would receive, rendered without a model (`tagloop prompt`, or a check of a
//! prompt before a run). An agent built from the same pieces sends exactly this.

use crate::llm::Prompt;
use crate::prompt::{ContextItem, SystemInput, Templates, ToolDoc};
use crate::tools::Registry;

use super::grammars::GrammarInputs;
use super::history::History;
use super::{AgentConfig, AgentError, Role};
use crate::policy::{Policy, QuestionNames};

/// The prompts of a run's first turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Preview {
    /// The system prompt rendered from the templates, the role and the tools; with the chat API it
    /// is also `first`'s first message.
    pub system: String,
    /// The first request's prompt: the messages (chat) or the whole text (completions).
    pub first: Prompt,
}

/// Render the system prompt and the first prompt an agent with these pieces would send for
/// `task`.
pub fn preview(
    tools: &Registry,
    role: &Role,
    templates: &Templates,
    config: &AgentConfig,
    task: &str,
    context: &[ContextItem],
) -> Result<Preview, AgentError> {
    let docs = tool_docs(tools);
    let input = system_input(role, &docs, config);
    let system = templates.system(&input)?;
    let question = templates.question(task, context)?;
    let first = History::start(config.api, templates, &input, &system, &question)?.prompt();
    Ok(Preview { system, first })
}

/// The grammar (GBNF) an agent with these pieces constrains a turn with on servers that take
/// one (`tagloop prompt --show-grammar`): an ordinary step, or the last turn at the step limit
/// (`final_only`), which allows only a final answer. Its paths are the workspace's; a run's
/// grammar also allows the files its question names ([`preview_grammar_for`]).
pub fn preview_grammar(
    tools: &Registry,
    role: &Role,
    config: &AgentConfig,
    final_only: bool,
) -> String {
    preview_grammar_for(tools, role, config, final_only, "")
}

/// [`preview_grammar`] as a run of `task` gets it: among its paths, the files the task names
/// that the workspace lacks (docs/configuration.md, *Paths the model can name*).
pub fn preview_grammar_for(
    tools: &Registry,
    role: &Role,
    config: &AgentConfig,
    final_only: bool,
    task: &str,
) -> String {
    let named = QuestionNames::of(task);
    GrammarInputs {
        tools,
        role,
        api: config.api,
    }
    .turn(final_only, config.reasoning, named.names())
    .to_gbnf()
}

/// The tools as the prompts describe them.
pub(super) fn tool_docs(tools: &Registry) -> Vec<ToolDoc> {
    tools
        .iter()
        .map(|t| ToolDoc::new(t.name(), t.description(), t.parameters()))
        .collect()
}

/// What the prompt templates are rendered from.
pub(super) fn system_input<'a>(
    role: &'a Role,
    docs: &'a [ToolDoc],
    config: &'a AgentConfig,
) -> SystemInput<'a> {
    SystemInput {
        role_name: role.name(),
        instructions: role.instructions(),
        output_schema: role.output_schema(),
        tools: docs,
        max_steps: config.max_steps,
        environment: &config.environment,
        thought: true,
        observation_header: config.policies.on(Policy::ObservationHeader),
    }
}
