//! The options shared by `run`, `continue`, `batch`, `prompt` and `tools`, and how they become a
//! model, tools, a role and an agent.
//!
//! Every option is optional here so that `continue` can tell what the user gave again from what
//! it restores from the session (flag > session > environment > `.env` > config file > default).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};

use tagloop::agent::{Agent, AgentConfig, Api, Role};
use tagloop::llm::Model;
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel, Secret};
use tagloop::llm::scripted::{Script, ScriptedModel};
use tagloop::prompt::{ContextItem, Templates};
use tagloop::tools::Registry;
use tagloop::tools::builtin::{ToolkitOptions, toolkit};
use tagloop::tools::confirm::TerminalConfirm;
use tagloop::tools::mcp::McpSource;
use tagloop::tools::workspace::Workspace;

use super::config::{Sources, resolve_model};

/// Options of a run. Stored (without the key) in the session so `continue` can restore them.
#[derive(Debug, Clone, Default, Args, Serialize, Deserialize)]
pub struct RunOpts {
    /// OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1 [env: OPENAI_BASE_URL]
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Bearer key; never printed or written anywhere [env: OPENAI_API_KEY]
    #[arg(long, value_name = "KEY")]
    #[serde(skip)]
    pub api_key: Option<String>,
    /// Model name, an alias from tagloop.toml, or scripted:PATH to replay a script offline [env: TAGLOOP_MODEL]
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// chat (/chat/completions) or completions (/completions with one growing text) [env: TAGLOOP_API]
    #[arg(long, value_name = "API", value_parser = ["chat", "completions"])]
    pub api: Option<String>,
    /// Role file (JSON or TOML): name, instructions, optional output_schema
    #[arg(long, value_name = "FILE")]
    pub role: Option<PathBuf>,
    /// A JSON Schema file the final answer must validate against
    #[arg(long, value_name = "FILE")]
    pub output_schema: Option<PathBuf>,
    /// Root for the file tools; nothing outside it can be read or written [default: .]
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Offer write_file, append_file, edit_file, make_dir, move_path, delete_path
    #[arg(long)]
    pub allow_write: bool,
    /// Offer run_command
    #[arg(long)]
    pub allow_shell: bool,
    /// Ask on the terminal before each write or command
    #[arg(long)]
    pub confirm: bool,
    /// Offer no built-in tools (only MCP tools, or none: a single-turn structured call)
    #[arg(long)]
    pub no_builtin_tools: bool,
    /// Step limit [default: 10]
    #[arg(long, value_name = "N")]
    pub max_steps: Option<u32>,
    /// Sampling temperature
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Token limit per model turn
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,
    /// Sampling seed
    #[arg(long)]
    pub seed: Option<i64>,
    /// A system prompt template (minijinja) to use instead of prompts/system.j2
    #[arg(long, value_name = "FILE")]
    pub prompt_template: Option<PathBuf>,
    /// Start an MCP server (a command line) and offer its tools as SERVER.TOOL; repeatable
    #[arg(long, value_name = "CMD")]
    pub mcp: Vec<String>,
    /// Workflow context: a JSON file with [{"name": …, "content": …}] or a text file
    #[arg(long, value_name = "FILE")]
    pub context: Option<PathBuf>,
    /// Time limit for one tool call, in seconds [default: 120]
    #[arg(long, value_name = "SECS")]
    pub tool_timeout: Option<u64>,
    /// Wall-clock limit for one model turn, in seconds [default: 600]
    #[arg(long, value_name = "SECS")]
    pub turn_timeout: Option<u64>,
    /// Continue chat turns with assistant prefill (for servers that support it, e.g. llama.cpp, vLLM)
    #[arg(long)]
    pub prefill: bool,
    /// Do not send stop strings to the server (they are still enforced on tagloop's side)
    #[arg(long)]
    pub no_server_stop: bool,
    /// Body field for the token limit: max_tokens, or max_completion_tokens [default: max_tokens]
    #[arg(long, value_name = "NAME")]
    pub token_field: Option<String>,
    /// Longest silence between bytes from the server, in seconds (raise it for slow model loads) [default: 120]
    #[arg(long, value_name = "SECS")]
    pub read_timeout: Option<u64>,
    /// Do not ask for usage in the stream (some proxies reject stream_options)
    #[arg(long)]
    pub no_usage: bool,
    /// Extra vendor fields for every request body, as a JSON object,
    /// e.g. '{"continue_final_message": true, "add_generation_prompt": false}' for vLLM prefill
    #[arg(long, value_name = "JSON")]
    pub extra: Option<String>,
    /// A batch task's own inline role, kept so `continue` checks the same schema (not a flag)
    #[arg(skip)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_inline: Option<serde_json::Value>,
    /// Config file [default: ./tagloop.toml, then the user's config dir]
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
}

impl RunOpts {
    /// Fill what is unset here from `saved` (options restored from a session).
    pub fn or(mut self, saved: RunOpts) -> RunOpts {
        macro_rules! fill {
            ($($f:ident),*) => { $( if self.$f.is_none() { self.$f = saved.$f; } )* };
        }
        fill!(
            base_url,
            model,
            api,
            role,
            output_schema,
            workspace,
            max_steps,
            temperature,
            max_tokens,
            seed,
            prompt_template,
            context,
            tool_timeout,
            turn_timeout,
            token_field,
            read_timeout,
            extra,
            role_inline
        );
        self.allow_write |= saved.allow_write;
        self.confirm |= saved.confirm;
        self.no_usage |= saved.no_usage;
        self.allow_shell |= saved.allow_shell;
        self.no_builtin_tools |= saved.no_builtin_tools;
        self.prefill |= saved.prefill;
        self.no_server_stop |= saved.no_server_stop;
        if self.mcp.is_empty() {
            self.mcp = saved.mcp;
        }
        self
    }

    /// Make paths absolute so a session can be continued from another directory.
    pub fn absolutize(mut self) -> RunOpts {
        let abs = |p: Option<PathBuf>| p.map(|p| std::path::absolute(&p).unwrap_or(p));
        self.role = abs(self.role);
        self.output_schema = abs(self.output_schema);
        // Pin the workspace, so `continue` from another directory works in the same place.
        self.workspace = abs(Some(self.workspace.unwrap_or_else(|| PathBuf::from("."))));
        self.prompt_template = abs(self.prompt_template);
        self.context = abs(self.context);
        if let Some(m) = &self.model
            && let Some(path) = m.strip_prefix("scripted:")
        {
            let p = std::path::absolute(path).unwrap_or_else(|_| PathBuf::from(path));
            self.model = Some(format!("scripted:{}", p.display()));
        }
        self
    }
}

/// Everything a run needs, built from the options.
pub struct Setup {
    pub model: ModelSpec,
    pub role: Role,
    pub tools: Registry,
    pub templates: Arc<Templates>,
    pub config: AgentConfig,
    pub context: Vec<ContextItem>,
    /// MCP servers to shut down at the end.
    pub mcp: Vec<McpSource>,
}

/// A model, or a script to replay (a fresh cursor per run).
#[derive(Clone)]
pub enum ModelSpec {
    Shared(Arc<dyn Model>),
    Scripted(Arc<Script>),
}

impl ModelSpec {
    /// The model for one run, starting `skip` turns into a script.
    pub fn instance(&self, skip: usize) -> Arc<dyn Model> {
        match self {
            ModelSpec::Shared(m) => m.clone(),
            ModelSpec::Scripted(s) => Arc::new(ScriptedModel::starting_at(s.clone(), skip)),
        }
    }
}

/// A usage or configuration error (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Turn an error into a usage error.
pub fn usage<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::Error::new(UsageError(format!("{e:#}")))
}

impl Setup {
    /// Resolve the options and start what they ask for (MCP servers included).
    pub async fn build(opts: &RunOpts, need_model: bool) -> Result<Setup> {
        let sources = Sources::load(opts.config.as_deref()).map_err(usage)?;
        let role = load_role(opts).map_err(usage)?;
        let api = match opts.api.clone().or_else(|| sources.var("TAGLOOP_API")) {
            Some(a) => parse_api(&a).map_err(usage)?,
            None => Api::Chat,
        };
        let (model, api, model_key) = if need_model || opts.model.is_some() {
            build_model(opts, &sources, role.name(), api).map_err(usage)?
        } else {
            (ModelSpec::Shared(Arc::new(NoModel)), api, None)
        };
        let workspace_root = opts.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
        let mut tools = Registry::new();
        let mut environment = vec![format!("operating system: {}", std::env::consts::OS)];
        if !opts.no_builtin_tools {
            let ws = Workspace::new(&workspace_root)
                .map_err(|e| usage(format!("--workspace {}: {e}", workspace_root.display())))?;
            environment.push(format!(
                "workspace: {} (paths are relative to it)",
                ws.root().display()
            ));
            let confirm: Option<Arc<dyn tagloop::tools::confirm::Confirm>> = if opts.confirm {
                Some(Arc::new(TerminalConfirm::new()))
            } else {
                None
            };
            tools.extend(toolkit(
                Arc::new(ws),
                ToolkitOptions {
                    allow_write: opts.allow_write,
                    allow_shell: opts.allow_shell,
                    confirm,
                    ..Default::default()
                },
            ));
        }
        let mut mcp = Vec::new();
        for cmd in &opts.mcp {
            let source = McpSource::start(cmd, Duration::from_secs(30))
                .await
                .with_context(|| format!("--mcp {cmd:?}"))
                .map_err(usage)?;
            for t in source.tools() {
                tools.add(t);
            }
            mcp.push(source);
        }
        let templates =
            Arc::new(Templates::load(opts.prompt_template.as_deref(), None, None).map_err(usage)?);
        let context = load_context(opts.context.as_deref()).map_err(usage)?;
        let config = AgentConfig {
            api,
            max_steps: opts.max_steps.unwrap_or(10),
            temperature: opts.temperature,
            max_tokens: opts.max_tokens,
            seed: opts.seed,
            tool_timeout: Duration::from_secs(opts.tool_timeout.unwrap_or(120)),
            environment,
            secrets: model_key.into_iter().collect(),
            ..AgentConfig::default()
        };
        if config.max_steps == 0 {
            return Err(usage("--max-steps must be at least 1"));
        }
        Ok(Setup {
            model,
            role,
            tools,
            templates,
            config,
            context,
            mcp,
        })
    }

    /// An agent for one run.
    pub fn agent(&self, model: Arc<dyn Model>) -> Result<Agent> {
        self.agent_for(model, None)
    }

    /// An agent for one run, with another role than the options' own.
    pub fn agent_for(&self, model: Arc<dyn Model>, role: Option<Role>) -> Result<Agent> {
        Agent::builder(model)
            .tools(self.tools.clone())
            .role(role.unwrap_or_else(|| self.role.clone()))
            .templates(self.templates.clone())
            .config(self.config.clone())
            .build()
            .map_err(usage)
    }

    /// Stop the MCP servers.
    pub async fn shutdown(&self) {
        for m in &self.mcp {
            m.shutdown().await;
        }
    }
}

fn parse_api(s: &str) -> Result<Api> {
    match s {
        "chat" => Ok(Api::Chat),
        "completions" => Ok(Api::Completions),
        other => bail!("unknown API `{other}`: use chat or completions"),
    }
}

/// A role from its inline JSON shape `{"name", "instructions", "output_schema"}`.
pub fn inline_role(obj: &serde_json::Value) -> Result<Role> {
    let name = obj
        .get("name")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("a helpful assistant");
    let instructions = obj
        .get("instructions")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("");
    let role = Role::new(name, instructions);
    Ok(match obj.get("output_schema") {
        Some(schema) => role.with_output_schema(schema.clone())?,
        None => role,
    })
}

fn load_role(opts: &RunOpts) -> Result<Role> {
    let role = match (&opts.role, &opts.output_schema, &opts.role_inline) {
        (Some(r), _, _) => Role::load(r)?,
        (None, _, Some(inline)) => inline_role(inline)?,
        (None, Some(s), None) => Role::load_schema(s)?,
        (None, None, None) => Role::default(),
    };
    match (&opts.role, &opts.output_schema) {
        (Some(_), Some(s)) => {
            let schema: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(s)
                    .with_context(|| format!("cannot read {}", s.display()))?,
            )
            .with_context(|| format!("{} is not JSON", s.display()))?;
            Ok(role.with_output_schema(schema)?)
        }
        _ => Ok(role),
    }
}

fn load_context(path: Option<&Path>) -> Result<Vec<ContextItem>> {
    let Some(path) = path else { return Ok(vec![]) };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read --context {}", path.display()))?;
    if let Ok(items) = serde_json::from_str::<Vec<ContextItem>>(&text) {
        return Ok(items);
    }
    if let Ok(map) = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&text) {
        return Ok(map
            .into_iter()
            .map(|(name, v)| ContextItem {
                name,
                content: v
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string()),
            })
            .collect());
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "context".into());
    Ok(vec![ContextItem {
        name,
        content: text,
    }])
}

/// The model, the API shape, and the key it uses (to redact it from tool output).
fn build_model(
    opts: &RunOpts,
    sources: &Sources,
    role: &str,
    api: Api,
) -> Result<(ModelSpec, Api, Option<String>)> {
    let target = resolve_model(
        sources,
        opts.model.as_deref(),
        opts.base_url.as_deref(),
        opts.api_key.as_deref(),
        Some(role),
    )?;
    let api = match (&opts.api, &target.api) {
        (None, Some(a)) => parse_api(a)?,
        _ => api,
    };
    if let Some(path) = target.model.strip_prefix("scripted:") {
        let script = Script::load(path).with_context(|| format!("--model {}", target.model))?;
        return Ok((
            ModelSpec::Scripted(script),
            api,
            target.api_key.clone().filter(|k| !k.is_empty()),
        ));
    }
    let Some(base_url) = target.base_url.clone() else {
        bail!(
            "model `{}` needs a server: pass --base-url (e.g. http://127.0.0.1:11434/v1 for Ollama), set OPENAI_BASE_URL, or use --model scripted:PATH",
            target.model
        );
    };
    let mut cfg = OpenAiConfig::new(base_url, target.model.clone());
    cfg.api_key = Secret::new(target.api_key.clone().unwrap_or_default());
    cfg.api = api;
    cfg.prefill = opts.prefill;
    cfg.send_stop = !opts.no_server_stop;
    if let Some(t) = opts.turn_timeout {
        cfg.turn_timeout = Some(Duration::from_secs(t));
    }
    if let Some(t) = opts.read_timeout {
        cfg.read_timeout = Duration::from_secs(t);
    }
    if let Some(f) = &opts.token_field {
        cfg.token_field = f.clone();
    }
    cfg.include_usage = !opts.no_usage;
    if let Some(extra) = &opts.extra {
        match serde_json::from_str::<serde_json::Value>(extra) {
            Ok(serde_json::Value::Object(map)) => cfg.extra = map,
            _ => bail!("--extra must be a JSON object, e.g. '{{\"top_k\": 20}}'"),
        }
    }
    let model = OpenAiModel::new(cfg)?;
    Ok((
        ModelSpec::Shared(Arc::new(model)),
        api,
        target.api_key.clone().filter(|k| !k.is_empty()),
    ))
}

/// The model of commands that never call one (`tools`, `prompt`).
struct NoModel;

impl Model for NoModel {
    fn turn<'a>(
        &'a self,
        _request: &'a tagloop::llm::TurnRequest,
        _on_delta: tagloop::llm::DeltaSink<'a>,
    ) -> futures::future::BoxFuture<'a, Result<tagloop::llm::TurnResult, tagloop::llm::LlmError>>
    {
        Box::pin(async { Err(tagloop::llm::LlmError::Other("no model configured".into())) })
    }

    fn describe(&self) -> String {
        "none".into()
    }
}
