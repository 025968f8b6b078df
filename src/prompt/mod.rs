//! Prompt templates (`prompts/*.j2`, rendered with minijinja).
//!
//! Three templates make every prompt:
//!
//! * `system.j2`: the system prompt — the five tags, three worked examples, the tools with their
//!   parameters (from their JSON Schemas, in declaration order), the role's instructions, the output
//!   schema when there is one, optional environment facts, and the step budget. Its compact form
//!   (`compact`, for small context windows) has one example and one line per tool.
//! * `question.j2`: the first user message — the task, with the context of a larger workflow.
//! * `completion.j2`: for `/completions` (base models), the whole run as one text: a compact
//!   few-shot document (a log of solved tasks, the tools one line each) that ends in the open
//!   task and an opened `<thought>`, so the model continues from there. It gets the system
//!   prompt's inputs, the rendered system prompt and the task. Later turns and observations
//!   are *appended* to it, never re-rendered.
//!
//! Rendering is deterministic: the same inputs give the same bytes (no timestamps), so prefix
//! caches on vLLM and llama.cpp keep working. The built-in templates are compiled into the
//! binary; [`Templates::load`] replaces any of them with the user's own files.

mod error;

use std::path::Path;

use minijinja::{Environment, UndefinedBehavior, context, value::Serde};
use serde::Serialize;
use serde_json::Value;

pub use error::PromptError;

/// The built-in system prompt template.
pub const SYSTEM_TEMPLATE: &str = include_str!("../../prompts/system.j2");
/// The built-in first-user-message template.
pub const QUESTION_TEMPLATE: &str = include_str!("../../prompts/question.j2");
/// The built-in completions-mode template.
pub const COMPLETION_TEMPLATE: &str = include_str!("../../prompts/completion.j2");

/// How the runtime begins the thought of the answer after a declined call (run:
/// `agent/first_call.rs`; serve: a guess or grounding that declines the calls); the model goes
/// on from it. Asked the same prompt again, a small model at temperature 0 writes the thought
/// it wrote before its call ("I need to find a tool that can help me with this.") and answers
/// after it, not the question. A whole thought of the runtime's ("I can reply to this question
/// from what I know.") or none at all did not help: the 1.5B still answered "yellow" for blue
/// and yellow paint; led into the thought by these words, it reasons ("blue and yellow are
/// primary colors, and mixing them results in green") and answers after its reasoning. Worded
/// unlike the worked examples' thought of a direct answer, which a base model would follow with
/// that example's answer ("William Shakespeare.").
pub const DECLINED_THOUGHT: &str = "Without any tool, from what I know:";

/// One tool as the prompt describes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDoc {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its parameters in declaration order.
    pub params: Vec<ParamDoc>,
}

/// One parameter of a tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParamDoc {
    /// Its name.
    pub name: String,
    /// Its JSON type in words (`string`, `integer`, `array of string`, `"a" | "b"`).
    #[serde(rename = "type")]
    pub ty: String,
    /// Whether it must be given.
    pub required: bool,
    /// Its description, if the schema has one.
    pub description: Option<String>,
}

impl ToolDoc {
    /// Describe a tool from its name, description and parameter schema (a JSON Schema object).
    pub fn new(name: &str, description: &str, parameters: &Value) -> Self {
        let required: Vec<&str> = parameters
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let params = parameters
            .get("properties")
            .and_then(Value::as_object)
            .map(|props| {
                props
                    .iter()
                    .map(|(pname, schema)| ParamDoc {
                        name: pname.clone(),
                        ty: type_words(schema),
                        required: required.contains(&pname.as_str()),
                        description: schema
                            .get("description")
                            .and_then(Value::as_str)
                            .map(|d| d.trim().to_string()),
                    })
                    .collect()
            })
            .unwrap_or_default();
        ToolDoc {
            name: name.to_string(),
            description: description.trim().to_string(),
            params,
        }
    }
}

/// A schema's type in a few words.
fn type_words(schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(" | ");
    }
    match schema.get("type") {
        Some(Value::String(t)) if t == "array" => match schema.get("items") {
            Some(items) => format!("array of {}", type_words(items)),
            None => "array".to_string(),
        },
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => {
            let ts: Vec<&str> = ts
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect();
            if ts.is_empty() {
                "any".to_string()
            } else {
                ts.join(" or ")
            }
        }
        _ => {
            if schema.get("anyOf").is_some() || schema.get("oneOf").is_some() {
                "any of several types".to_string()
            } else {
                "any".to_string()
            }
        }
    }
}

/// A named piece of context from a larger workflow (the output of an earlier step).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ContextItem {
    /// What it is (`plan`, `step 1 output`).
    pub name: String,
    /// Its content.
    pub content: String,
}

/// Everything the system prompt states.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemInput<'a> {
    /// The role's name.
    pub role_name: &'a str,
    /// The role's instructions (may be empty).
    pub instructions: &'a str,
    /// The output schema, when the final answer must be JSON.
    pub output_schema: Option<&'a Value>,
    /// The tools, in order.
    pub tools: &'a [ToolDoc],
    /// How many tool-calling steps the run may take; the built-in templates tell the model this
    /// number (`max_steps`).
    pub max_steps: u32,
    /// Environment facts, one line each (OS, workspace, a short file list).
    pub environment: &'a [String],
    /// Whether each turn is taught to begin with a `<thought>` (the variable `thought`), and
    /// in completions mode the text ends in an opened one: true everywhere but under `tagloop
    /// serve --thought none`, whose grammar leaves the thought out. The built-in run
    /// templates always teach it.
    pub thought: bool,
    /// Whether a tool's result begins with the call and the number of lines it returned
    /// (policy `observation-header`): the worked examples' observations show what the run will
    /// send (the variable `observation_header`).
    pub observation_header: bool,
}

impl SystemInput<'_> {
    /// The template variables of the system prompt (the completions document gets them too).
    fn context(&self) -> minijinja::Value {
        let schema = self
            .output_schema
            .map(|s| serde_json::to_string_pretty(s).unwrap_or_else(|_| s.to_string()));
        context! {
            role_name => self.role_name,
            instructions => self.instructions.trim(),
            output_schema => schema,
            tools => Serde(self.tools),
            max_steps => self.max_steps,
            environment => Serde(self.environment),
            thought => self.thought,
            observation_header => self.observation_header,
            // Deleted with the `closing-line` rule (issue 43); always false, so that a template
            // written before, which may test it, still renders.
            closing_line => false,
            compact => false,
        }
    }
}

/// The `first_sentence` filter: a description up to the end of its first sentence (a `.`, `!`
/// or `?` followed by a space or the end, or the first line break), for compact tool lists.
fn first_sentence(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or_default();
    let bytes = line.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1).is_none_or(|n| *n == b' ') {
            return line[..=i].to_string();
        }
    }
    line.to_string()
}

/// The three prompt templates (system, question, completion), compiled: the built-in ones
/// ([`Templates::builtin`], the default) or files that replace some of them ([`Templates::load`]).
#[derive(Debug)]
pub struct Templates {
    env: Environment<'static>,
}

impl Default for Templates {
    fn default() -> Self {
        Self::builtin()
    }
}

impl Templates {
    /// The built-in templates.
    pub fn builtin() -> Self {
        Self::from_sources(
            SYSTEM_TEMPLATE.into(),
            QUESTION_TEMPLATE.into(),
            COMPLETION_TEMPLATE.into(),
        )
        .expect("the built-in templates are valid (checked by tests)")
    }

    /// The built-in templates, with any of them replaced by a file.
    pub fn load(
        system: Option<&Path>,
        question: Option<&Path>,
        completion: Option<&Path>,
    ) -> Result<Self, PromptError> {
        let read = |p: Option<&Path>, builtin: &str| -> Result<String, PromptError> {
            match p {
                None => Ok(builtin.to_string()),
                Some(p) => std::fs::read_to_string(p).map_err(|source| PromptError::Read {
                    path: p.display().to_string(),
                    source,
                }),
            }
        };
        Self::from_sources(
            read(system, SYSTEM_TEMPLATE)?,
            read(question, QUESTION_TEMPLATE)?,
            read(completion, COMPLETION_TEMPLATE)?,
        )
    }

    /// Templates from their sources (system, question, completion), as [`Templates::load`]
    /// compiles files: `tagloop serve` uses its own system and completion templates this way.
    /// A source that does not compile is a [`PromptError::Template`].
    pub fn from_sources(
        system: String,
        question: String,
        completion: String,
    ) -> Result<Self, PromptError> {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|source| PromptError::Template {
                name: "syntax".into(),
                source,
            })?;
        env.set_syntax(syntax);
        env.add_filter("first_sentence", |s: String| first_sentence(&s));
        for (name, src) in [
            ("system", system),
            ("question", question),
            ("completion", completion),
        ] {
            env.add_template_owned(name, src)
                .map_err(|source| PromptError::Template {
                    name: name.into(),
                    source,
                })?;
        }
        Ok(Templates { env })
    }

    fn render(&self, name: &str, ctx: minijinja::Value) -> Result<String, PromptError> {
        self.env
            .get_template(name)
            .and_then(|t| t.render(ctx))
            .map_err(|source| PromptError::Template {
                name: name.into(),
                source,
            })
    }

    /// Render the system template for `input`; a replaced template that does not render is a
    /// [`PromptError`].
    pub fn system(&self, input: &SystemInput<'_>) -> Result<String, PromptError> {
        self.render("system", input.context())
    }

    /// The system template's compact form for `input` (the variable `compact` is true): for a
    /// small context window, the built-in template leaves out its second and third examples and
    /// the rules for long strings, and lists each tool on one line (its first sentence, its
    /// parameters' names and types). A replaced template that does not read `compact` renders as it always
    /// does.
    pub fn system_compact(&self, input: &SystemInput<'_>) -> Result<String, PromptError> {
        self.render("system", context! { compact => true, ..input.context() })
    }

    /// The first user message: the task, with workflow context.
    pub fn question(&self, task: &str, context: &[ContextItem]) -> Result<String, PromptError> {
        self.render(
            "question",
            context! { task => task.trim(), context => Serde(context) },
        )
    }

    /// The start of the completions-mode text, ending in an opened `<thought>` (where
    /// [`SystemInput::thought`] is set; serve's template leaves it out otherwise): a compact
    /// few-shot document built from the same inputs as the system prompt, with the rendered
    /// system prompt (`system`, for templates that want it whole) and the task (`question`).
    pub fn completion(
        &self,
        input: &SystemInput<'_>,
        system: &str,
        question: &str,
    ) -> Result<String, PromptError> {
        self.render(
            "completion",
            context! { system => system, question => question.trim(), ..input.context() },
        )
    }
}

#[cfg(test)]
mod tests;
