//! The options shared by `run`, `continue`, `batch`, `prompt` and `tools`, and how they become a
//! model, tools, a role and an agent.
//!
//! Every option is optional here so that `continue` can tell what the user gave again from what
//! it restores from the session (flag > session > environment > `.env` > config file > default).
//! A session file may come from someone else, so `continue` restores only options that cannot
//! act on the machine or the key ([`RunOpts::restore`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};

use tagloop::agent::{Agent, AgentConfig, Role};
use tagloop::llm::Api;
use tagloop::llm::Model;
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::llm::scripted::{Script, ScriptedModel};
use tagloop::prompt::{ContextItem, Templates};
use tagloop::secret::Redactor;
use tagloop::secret::Secret;
use tagloop::tools::ChildEnv;
use tagloop::tools::Registry;
use tagloop::tools::{
    McpAccess, McpOptions, McpSource, TerminalConfirm, ToolkitOptions, Workspace, toolkit,
};

use super::config::{Sources, resolve_model};

/// Options of a run. Stored (without the key or MCP command lines) in the session so `continue`
/// can restore the harmless ones and name the others.
#[derive(Debug, Clone, Default, Args, Serialize, Deserialize)]
#[serde(default)] // a session written before a flag existed still restores the others
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
    /// Token limit per model turn; 0 sends none [default: 1024]
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,
    /// Let a turn repeat itself: turn off the guard that cuts a turn whose text keeps repeating
    #[arg(long)]
    pub keep_repetitions: bool,
    /// Sampling seed
    #[arg(long)]
    pub seed: Option<i64>,
    /// A system prompt template (minijinja) to use instead of prompts/system.j2
    #[arg(long, value_name = "FILE")]
    pub prompt_template: Option<PathBuf>,
    /// Start an MCP server (a command line) and offer its tools as SERVER.TOOL; repeatable
    #[arg(long, value_name = "CMD")]
    #[serde(skip)]
    pub mcp: Vec<String>,
    /// Like --mcp, for a server you vouch only reads: all its tools are offered without --allow-write and never asked about under --confirm
    #[arg(long, value_name = "CMD")]
    #[serde(skip)]
    pub mcp_read_only: Vec<String>,
    /// Pass the variable NAME (from the environment or .env) to MCP servers even if it is a key tagloop uses; repeatable
    #[arg(long, value_name = "NAME")]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_env: Vec<String>,
    /// The names of the MCP servers the run used: a session records these, never the command
    /// lines (which may carry tokens), so `continue` can say what to restate (not a flag)
    #[arg(skip)]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<String>,
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
    /// Fill what is unset here from `saved` (options recorded in a session), restoring only what
    /// cannot act on the machine or the key: the model's name and API, the role, limits and
    /// sampling. Never restored: gates (`--allow-write`, `--allow-shell`), MCP servers, the
    /// workspace, the base URL and `--extra` (a crafted session file would otherwise run a
    /// command, open a gate, move the workspace or send the user's key to its own server the
    /// moment it is continued). Returns what was recorded but not restored, as notices that say
    /// how to restate it. `legacy_mcp` is the `mcp` command lines older sessions stored: only
    /// their program names are shown.
    pub fn restore(mut self, saved: RunOpts, legacy_mcp: &[String]) -> (RunOpts, Vec<String>) {
        let mut notices = Vec::new();
        let mut flags: Vec<String> = Vec::new();
        if saved.allow_write && !self.allow_write {
            flags.push("--allow-write".into());
        }
        if saved.allow_shell && !self.allow_shell {
            flags.push("--allow-shell".into());
        }
        let mut servers = saved.mcp_servers.clone();
        servers.extend(legacy_mcp.iter().map(|c| program_name(c)));
        if !servers.is_empty() && self.mcp.is_empty() {
            let mut what = flags.clone();
            what.push(format!(
                "{} MCP server{} ({})",
                servers.len(),
                if servers.len() == 1 { "" } else { "s" },
                servers.join(", ")
            ));
            let mut restate = flags.join(" ");
            for _ in &servers {
                restate.push_str(" --mcp 'COMMAND'");
            }
            notices.push(format!(
                "the session ran with {}: continue does not restore them; restate them with {} to use them",
                what.join(" and "),
                restate.trim()
            ));
        } else if !flags.is_empty() {
            notices.push(format!(
                "the session ran with {0}: continue does not restore gates; restate them with {0} to use them",
                flags.join(" ")
            ));
        }
        let here = std::path::absolute(self.workspace.clone().unwrap_or_else(|| ".".into())).ok();
        if let Some(ws) = &saved.workspace
            && self.workspace.is_none()
            && here.as_ref() != Some(ws)
        {
            notices.push(format!(
                "the session's workspace was {}; this run uses {}: restate it with --workspace {:?} to work there",
                ws.display(),
                here.map(|p| p.display().to_string()).unwrap_or_else(|| ".".into()),
                ws.display().to_string()
            ));
        }
        if let Some(url) = &saved.base_url
            && self.base_url.is_none()
        {
            notices.push(format!(
                "the session used the server {url}; continue picks the server from your own flags, environment and config (a recorded one would receive your key): restate it with --base-url {url} to use it"
            ));
        }
        if saved.extra.is_some() && self.extra.is_none() {
            notices.push(
                "the session sent extra body fields (--extra); continue does not restore them: restate --extra JSON to send them".into(),
            );
        }
        macro_rules! fill {
            ($($f:ident),*) => { $( if self.$f.is_none() { self.$f = saved.$f; } )* };
        }
        fill!(
            model,
            api,
            role,
            output_schema,
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
            role_inline
        );
        // These only narrow what a run may do, or shape requests to the user's own server.
        self.confirm |= saved.confirm;
        self.no_builtin_tools |= saved.no_builtin_tools;
        self.no_usage |= saved.no_usage;
        self.prefill |= saved.prefill;
        self.no_server_stop |= saved.no_server_stop;
        self.keep_repetitions |= saved.keep_repetitions;
        (self, notices)
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

/// The file name of a command line's program, the only part of a recorded MCP command that is
/// ever shown (its arguments may hold tokens).
fn program_name(command: &str) -> String {
    let first = command
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .trim_matches(|c| c == '\'' || c == '"');
    Path::new(first)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "?".into())
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
    /// Every key the configuration holds: removed from the outcome, events and transcript.
    pub redactor: Redactor,
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
        let (model, api, keys) = if need_model || opts.model.is_some() {
            build_model(opts, &sources, role.name(), api).map_err(usage)?
        } else {
            (ModelSpec::Shared(Arc::new(NoModel)), api, Vec::new())
        };
        let child_env = child_env(&sources, &keys);
        let workspace_root = opts.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
        let mut tools = Registry::new();
        let mut environment = vec![format!("operating system: {}", std::env::consts::OS)];
        let confirm: Option<Arc<dyn tagloop::tools::Confirm>> = if opts.confirm {
            Some(Arc::new(TerminalConfirm::new()))
        } else {
            None
        };
        if !opts.no_builtin_tools {
            let ws = Workspace::new(&workspace_root)
                .map_err(|e| usage(format!("--workspace {}: {e}", workspace_root.display())))?;
            environment.push(format!(
                "workspace: {} (paths are relative to it)",
                ws.root().display()
            ));
            tools.extend(toolkit(
                Arc::new(ws),
                ToolkitOptions {
                    allow_write: opts.allow_write,
                    allow_shell: opts.allow_shell,
                    confirm: confirm.clone(),
                    child_env: child_env.clone(),
                    ..Default::default()
                },
            ));
        }
        let mut mcp = Vec::new();
        // MCP servers get the same environment as commands, plus what --mcp-env names.
        let mut mcp_env = child_env.clone();
        for name in &opts.mcp_env {
            match sources.var(name) {
                Some(v) => mcp_env = mcp_env.set(name.clone(), v),
                None => tracing::warn!("--mcp-env {name}: the variable is not set"),
            }
        }
        let servers = opts
            .mcp
            .iter()
            .map(|c| ("--mcp", c, McpAccess::Annotations))
            .chain(
                opts.mcp_read_only
                    .iter()
                    .map(|c| ("--mcp-read-only", c, McpAccess::ReadOnly)),
            );
        for (flag, cmd, access) in servers {
            let mcp_opts = McpOptions {
                env: mcp_env.clone(),
                access,
                allow_write: opts.allow_write,
                confirm: confirm.clone(),
                ..McpOptions::default()
            };
            let source = McpSource::start_with(cmd, mcp_opts)
                .await
                .with_context(|| format!("{flag} {cmd:?}"))
                .map_err(usage)?;
            for t in source.tools() {
                tools.add(t);
            }
            mcp.push(source);
        }
        let templates =
            Arc::new(Templates::load(opts.prompt_template.as_deref(), None, None).map_err(usage)?);
        let context = load_context(opts.context.as_deref()).map_err(usage)?;
        let defaults = AgentConfig::default();
        let config = AgentConfig {
            api,
            max_steps: opts.max_steps.unwrap_or(defaults.max_steps),
            temperature: opts.temperature,
            max_tokens: match opts.max_tokens {
                None => Some(tagloop::agent::DEFAULT_MAX_TOKENS),
                Some(0) => None,
                Some(n) => Some(n),
            },
            keep_repetitions: opts.keep_repetitions,
            seed: opts.seed,
            tool_timeout: opts
                .tool_timeout
                .map_or(defaults.tool_timeout, Duration::from_secs),
            environment,
            secrets: tagloop::secret::Redactor::with(&keys),
            ..defaults
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
            redactor: Redactor::with(&keys),
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

    /// The options as a session records them: with the MCP servers' names, never their commands.
    pub fn record(&self, opts: &RunOpts) -> serde_json::Value {
        let mut opts = opts.clone();
        opts.mcp_servers = self.mcp.iter().map(|m| m.name().to_string()).collect();
        serde_json::to_value(&opts).unwrap_or_default()
    }

    /// Stop the MCP servers.
    pub async fn shutdown(&self) {
        for m in &self.mcp {
            m.shutdown().await;
        }
    }
}

/// The environment of every child (commands, MCP servers): without the variables that hold a key
/// tagloop knows of (each provider's `api_key_env`, the OpenAI variables) and without any variable
/// whose value contains one of those keys or any key the configuration holds.
fn child_env(sources: &Sources, known_keys: &[String]) -> ChildEnv {
    let mut env = ChildEnv::new();
    for name in ["OPENAI_API_KEY", "OPENAI_ADMIN_KEY"] {
        if let Some(v) = sources.var(name) {
            env = env.secret(v);
        }
    }
    for provider in sources.file.providers.values() {
        if let Some(name) = &provider.api_key_env {
            if let Some(v) = sources.var(name) {
                env = env.secret(v);
            }
            env = env.remove(name.clone());
        }
        if let Some(k) = &provider.api_key {
            env = env.secret(k.clone());
        }
    }
    for k in known_keys {
        env = env.secret(k.clone());
    }
    env
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

/// The model, the API shape, and every key the configuration holds (to redact them all).
fn build_model(
    opts: &RunOpts,
    sources: &Sources,
    role: &str,
    api: Api,
) -> Result<(ModelSpec, Api, Vec<String>)> {
    let target = resolve_model(
        sources,
        opts.model.as_deref(),
        opts.base_url.as_deref(),
        opts.api_key.as_deref(),
        Some(role),
    )?;
    if let Some(why) = &target.withheld {
        eprintln!("warning: {why}");
    }
    let keys = target.known_keys.clone();
    let api = match (&opts.api, &target.api) {
        (None, Some(a)) => parse_api(a)?,
        _ => api,
    };
    if let Some(path) = target.model.strip_prefix("scripted:") {
        let script = Script::load(path).with_context(|| format!("--model {}", target.model))?;
        return Ok((ModelSpec::Scripted(script), api, keys));
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
    Ok((ModelSpec::Shared(Arc::new(model)), api, keys))
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
