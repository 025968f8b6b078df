//! Building an [`Agent`]: the model first, then tools, role, templates and settings; `build`
//! renders the system prompt once, so every run of the agent starts from the same bytes (the turn
//! grammars are built at the first turn that may send one).

use std::sync::Arc;

use crate::llm::Model;
use crate::prompt::Templates;
use crate::tools::Registry;

use super::preview::{system_input, tool_docs};
use super::{Agent, AgentConfig, AgentError, Api, Role};

/// Builds an [`Agent`].
pub struct AgentBuilder {
    model: Arc<dyn Model>,
    tools: Registry,
    role: Role,
    templates: Arc<Templates>,
    config: AgentConfig,
}

impl AgentBuilder {
    /// A builder with no tools, the default role, the built-in templates and default settings.
    pub(crate) fn new(model: Arc<dyn Model>) -> Self {
        /// The built-in templates, compiled once per process and shared by every builder that
        /// keeps them (compiling them is most of the cost of building an agent).
        fn builtin_templates() -> Arc<Templates> {
            static BUILTIN: std::sync::OnceLock<Arc<Templates>> = std::sync::OnceLock::new();
            BUILTIN
                .get_or_init(|| Arc::new(Templates::builtin()))
                .clone()
        }
        AgentBuilder {
            model,
            tools: Registry::new(),
            role: Role::default(),
            templates: builtin_templates(),
            config: AgentConfig::default(),
        }
    }

    /// Offer these tools.
    pub fn tools(mut self, tools: Registry) -> Self {
        self.tools = tools;
        self
    }

    /// Use this role.
    pub fn role(mut self, role: Role) -> Self {
        self.role = role;
        self
    }

    /// Use these templates.
    pub fn templates(mut self, templates: Arc<Templates>) -> Self {
        self.templates = templates;
        self
    }

    /// Use these settings.
    pub fn config(mut self, config: AgentConfig) -> Self {
        self.config = config;
        self
    }

    /// Set the step limit.
    pub fn max_steps(mut self, n: u32) -> Self {
        self.config.max_steps = n;
        self
    }

    /// Set how requests are fitted into the model's context window.
    pub fn context(mut self, policy: super::ContextPolicy) -> Self {
        self.config.context = policy;
        self
    }

    /// Set the API shape.
    pub fn api(mut self, api: Api) -> Self {
        self.config.api = api;
        self
    }

    /// Render the system prompt and make the agent.
    pub fn build(self) -> Result<Agent, AgentError> {
        let docs = tool_docs(&self.tools);
        let system = self
            .templates
            .system(&system_input(&self.role, &docs, &self.config))?;
        Ok(Agent {
            model: self.model,
            tools: self.tools,
            tool_docs: docs,
            role: self.role,
            templates: self.templates,
            config: self.config,
            system,
            system_compact: std::sync::OnceLock::new(),
            grammars: std::sync::OnceLock::new(),
        })
    }
}
