//! From options to the pieces of a run: the model client (with the key only for the base URL
//! it was configured with), the role, the tools (built-in toolkit under its gates, MCP servers),
//! the templates, the context and the agent's settings.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use tagloop::agent::{Agent, AgentConfig, ContextPolicy, Role};
use tagloop::llm::Api;
use tagloop::llm::Model;
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::llm::{Script, ScriptedModel};
use tagloop::prompt::{ContextItem, Templates};
use tagloop::secret::Redactor;
use tagloop::secret::Secret;
use tagloop::shown::one_line;
use tagloop::tools::ChildEnv;
use tagloop::tools::Registry;
use tagloop::tools::{
    McpAccess, McpOptions, McpSource, TerminalConfirm, ToolkitOptions, Workspace, toolkit,
};

use super::config::Sources;
use super::target::{ModelTarget, resolve_model};

use super::options::RunOpts;
use super::usage::{usage, usage_chain};

/// Everything a run needs, built from the options.
pub struct Setup {
    /// The model; `None` for the commands that never call one (`tools`, `prompt`).
    pub model: Option<ModelSpec>,
    pub role: Role,
    pub tools: Registry,
    pub templates: Arc<Templates>,
    pub config: AgentConfig,
    pub context: Vec<ContextItem>,
    /// MCP servers to shut down at the end.
    pub mcp: Vec<McpSource>,
    /// Every key the configuration holds: removed from the outcome, events and transcript.
    pub redactor: Redactor,
    /// The environment of child processes: without any key tagloop knows of.
    pub child_env: ChildEnv,
    /// The agent for tasks without a role of their own, built once when the model is shared.
    shared_agent: std::sync::OnceLock<Arc<Agent>>,
    /// The model the server was asked for, when no option named one: a command that builds
    /// more setups from the same options (eval, per task) names it, so the server is asked once.
    pub picked_model: Option<String>,
}

/// A model, or a script to replay (a fresh cursor per run).
#[derive(Clone)]
pub enum ModelSpec {
    Shared(Arc<dyn Model>),
    /// A script, and the context window stated for it.
    Scripted(Arc<Script>, Option<u64>),
}

impl ModelSpec {
    /// The model for one run, starting `skip` turns into a script.
    pub fn instance(&self, skip: usize) -> Arc<dyn Model> {
        match self {
            ModelSpec::Shared(m) => m.clone(),
            ModelSpec::Scripted(s, window) => {
                Arc::new(ScriptedModel::starting_at(s.clone(), skip).with_context_window(*window))
            }
        }
    }
}

impl Setup {
    /// Resolve the options and start what they ask for (MCP servers included).
    pub async fn build(opts: &RunOpts, need_model: bool) -> Result<Setup> {
        Setup::build_with_secrets(opts, need_model, &[]).await
    }

    /// [`Setup::build`], with more secrets (a queue's password) kept out of every output and every
    /// child's environment, as the model's key is.
    pub async fn build_with_secrets(
        opts: &RunOpts,
        need_model: bool,
        secrets: &[String],
    ) -> Result<Setup> {
        let sources = Sources::load(opts.config.as_deref()).map_err(usage)?;
        let role = load_role(opts).map_err(|e| usage_chain(&e))?;
        // A continued run's recorded list holds the file's too (`RunOpts::restore`).
        let file_off = (sources.file.policies.as_ref()).filter(|_| !opts.policies_from_session);
        let policies = super::policies::resolve(
            opts.policy_off.as_deref().unwrap_or_default(),
            file_off.map(|p| p.off.as_slice()),
        )?;
        let api = match opts.api.clone().or_else(|| sources.var("TAGLOOP_API")) {
            Some(a) => parse_api(&a).map_err(usage)?,
            None => Api::Chat,
        };
        let (model, api, keys, reasoning, picked_model) = if need_model || opts.model.is_some() {
            let built = build_model(opts, &sources, role.name(), api).await?;
            (
                Some(built.spec),
                built.api,
                built.keys,
                built.reasoning,
                built.picked,
            )
        } else {
            (None, api, Vec::new(), opts.reasoning, None)
        };
        let mut keys = keys;
        keys.extend(secrets.iter().filter(|s| !s.is_empty()).cloned());
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
        let mcp = start_mcp(opts, &sources, &child_env, &confirm, &mut tools).await?;
        let templates =
            Arc::new(Templates::load(opts.prompt_template.as_deref(), None, None).map_err(usage)?);
        let context = load_context(opts.context.as_deref()).map_err(usage)?;
        let mut config = agent_config(opts, api, environment, &keys);
        config.reasoning = reasoning;
        config.policies = policies;
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
            child_env,
            shared_agent: std::sync::OnceLock::new(),
            picked_model,
        })
    }

    /// The model for one run, starting `skip` turns into a script.
    pub fn model(&self, skip: usize) -> Result<Arc<dyn Model>> {
        self.model
            .as_ref()
            .map(|m| m.instance(skip))
            .ok_or_else(|| usage("no model: give --model (or TAGLOOP_MODEL)"))
    }

    /// An agent driving `model` with these options' tools, role and settings
    /// ([`agent_for`](Self::agent_for) takes another role).
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

    /// The agent for one task of a batch: with the task's role, or else the one agent every
    /// role-less task shares (built once: its system prompt is the same for all of them) when
    /// the model is shared too. A script replays from its start for each task, so a scripted
    /// model gets a fresh agent every time.
    pub fn task_agent(&self, role: Option<Role>) -> Result<Arc<Agent>> {
        let shared = matches!(self.model, Some(ModelSpec::Shared(_)));
        if role.is_some() || !shared {
            return Ok(Arc::new(self.agent_for(self.model(0)?, role)?));
        }
        if let Some(agent) = self.shared_agent.get() {
            return Ok(agent.clone());
        }
        let agent = Arc::new(self.agent_for(self.model(0)?, None)?);
        Ok(self.shared_agent.get_or_init(|| agent).clone())
    }

    /// The options as a session records them: with the MCP servers' names, never their commands.
    pub fn record(&self, opts: &RunOpts) -> serde_json::Value {
        let mut opts = opts.clone();
        opts.mcp_servers = self.mcp.iter().map(|m| m.name().to_string()).collect();
        // A model picked from the server is recorded, so `continue` goes on with the same one
        // even if the server serves another (or several) by then.
        if opts.model.is_none() {
            opts.model.clone_from(&self.picked_model);
        }
        // The policies the run had, the config file's included: `continue` goes on with them.
        opts.policy_off = Some(
            self.config
                .policies
                .off_names()
                .into_iter()
                .map(String::from)
                .collect(),
        );
        serde_json::to_value(&opts).unwrap_or_default()
    }

    /// Stop the MCP servers.
    pub async fn shutdown(&self) {
        for m in &self.mcp {
            m.shutdown().await;
        }
    }
}

/// Start the MCP servers the options name and add their tools. They get the same environment as
/// commands, plus what `--mcp-env` names.
async fn start_mcp(
    opts: &RunOpts,
    sources: &Sources,
    child_env: &ChildEnv,
    confirm: &Option<Arc<dyn tagloop::tools::Confirm>>,
    tools: &mut Registry,
) -> Result<Vec<McpSource>> {
    let mut mcp = Vec::new();
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
    Ok(mcp)
}

/// The loop's settings from the options (defaults from `AgentConfig::default()`).
fn agent_config(
    opts: &RunOpts,
    api: Api,
    environment: Vec<String>,
    keys: &[String],
) -> AgentConfig {
    let defaults = AgentConfig::default();
    AgentConfig {
        api,
        max_steps: opts.max_steps.unwrap_or(defaults.max_steps),
        temperature: opts.temperature,
        max_tokens: match opts.max_tokens {
            None => defaults.max_tokens,
            Some(0) => None,
            Some(n) => Some(n),
        },
        keep_repetitions: opts.keep_repetitions,
        decide: !opts.no_decide,
        seed: opts.seed,
        tool_timeout: opts
            .tool_timeout
            .map_or(defaults.tool_timeout, Duration::from_secs),
        environment,
        secrets: Redactor::with(keys),
        context: if opts.no_context_fit {
            ContextPolicy::off()
        } else {
            defaults.context
        },
        ..defaults
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

fn load_role(opts: &RunOpts) -> Result<Role> {
    let role = match (&opts.role, &opts.output_schema, &opts.role_inline) {
        (Some(r), _, _) => Role::load(r)?,
        (None, _, Some(inline)) => Role::from_inline(inline)?,
        (None, Some(s), None) => Role::load_schema(s)?,
        (None, None, None) => Role::default(),
    };
    match (&opts.role, &opts.output_schema) {
        (Some(_), Some(s)) => Ok(role.with_output_schema(Role::read_schema(s)?)?),
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

/// The model, the API shape, every key the configuration holds (to redact them all), and
/// whether the model reasons first (`--reasoning`, or its provider says so).
///
/// Errors in the options are usage errors (exit 2). When no model is named, the server is asked
/// for its one model ([`pick_model`]): a server that cannot be reached fails the run (exit 1).
async fn build_model(
    opts: &RunOpts,
    sources: &Sources,
    role: &str,
    api: Api,
) -> Result<BuiltModel> {
    let (target, cfg, api, keys) =
        model_config(opts, sources, role, api).map_err(|e| usage_chain(&e))?;
    let (cfg, picked) = match cfg {
        ModelConfig::Scripted(script) => {
            let window = opts.context_window.or(target.context);
            return Ok(BuiltModel {
                spec: ModelSpec::Scripted(script, window),
                api,
                keys,
                reasoning: opts.reasoning,
                picked: None,
            });
        }
        ModelConfig::Server(cfg) if target.ask_server => {
            let cfg = pick_model(*cfg).await?;
            let picked = Some(cfg.model.clone());
            (cfg, picked)
        }
        ModelConfig::Server(cfg) => (*cfg, None),
    };
    let model = OpenAiModel::new(cfg).map_err(usage)?;
    Ok(BuiltModel {
        spec: ModelSpec::Shared(Arc::new(model)),
        api,
        keys,
        reasoning: opts.reasoning || target.reasoning.unwrap_or(false),
        picked,
    })
}

/// What [`build_model`] resolves.
struct BuiltModel {
    spec: ModelSpec,
    api: Api,
    /// Every key the configuration holds, to redact them all.
    keys: Vec<String>,
    /// The model reasons before it answers.
    reasoning: bool,
    /// The server's one model, asked for because no option named a model.
    picked: Option<String>,
}

/// A script to replay, or the settings of a client for a server.
enum ModelConfig {
    Scripted(Arc<Script>),
    Server(Box<OpenAiConfig>),
}

/// Where the model lives and how to reach it, from the options and the configuration.
fn model_config(
    opts: &RunOpts,
    sources: &Sources,
    role: &str,
    api: Api,
) -> Result<(ModelTarget, ModelConfig, Api, Vec<String>)> {
    let mut target = resolve_model(
        sources,
        opts.model.as_deref(),
        opts.base_url.as_deref(),
        opts.api_key.as_deref(),
        Some(role),
    )?;
    if opts.session_base_url {
        // A server named by a session file gets no key from anywhere (README, threat model).
        target.api_key = None;
        target.withheld = None;
    }
    if let Some(why) = &target.withheld {
        eprintln!("warning: {why}");
    }
    let keys = target.known_keys.clone();
    let api = match (&opts.api, &target.api) {
        (None, Some(a)) => parse_api(a)?,
        _ => api,
    };
    if let Some(path) = target.model.strip_prefix("scripted:") {
        // The script's error names the file and says what is wrong with it; `--model` says
        // which option brought it in. (Its path is already absolute: `RunOpts::absolutize`.)
        let script = Script::load(path).map_err(|e| anyhow::anyhow!("--model: {e}"))?;
        return Ok((target, ModelConfig::Scripted(script), api, keys));
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
    cfg.stream = !opts.no_stream && target.stream != Some(false);
    cfg.context_window = opts.context_window.or(target.context);
    if let Some(mode) = opts.grammar.as_ref().or(target.grammar.as_ref()) {
        cfg.grammar = mode.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    }
    if let Some(syntax) = opts
        .grammar_syntax
        .as_ref()
        .or(target.grammar_syntax.as_ref())
    {
        cfg.grammar_syntax = syntax
            .parse()
            .map_err(|e: String| anyhow::anyhow!("--grammar-syntax: {e}"))?;
    }
    if let Some(kind) = opts.server.as_ref().or(target.server.as_ref()) {
        cfg.server = Some(
            kind.parse()
                .map_err(|e: String| anyhow::anyhow!("--server: {e}"))?,
        );
    }
    if let Some(extra) = &opts.extra {
        match serde_json::from_str::<serde_json::Value>(extra) {
            Ok(serde_json::Value::Object(map)) => cfg.extra = map,
            _ => bail!("--extra must be a JSON object, e.g. '{{\"top_k\": 20}}'"),
        }
    }
    Ok((target, ModelConfig::Server(Box::new(cfg)), api, keys))
}

/// A model id from the server, as shown to the user: at most 200 characters, made
/// [`one_line`] (newlines, escapes, bidirectional overrides escaped), so an id can neither
/// drive the terminal nor fake a line of tagloop's own output. The run's header shows the id
/// picked the same way (`live.rs`).
fn shown_id(id: &str) -> String {
    one_line(&id.chars().take(200).collect::<String>()).into_owned()
}

/// The ids shown when a server serves several models, at most.
const MODELS_SHOWN: usize = 20;

/// `cfg` with the model the server serves, when it serves exactly one; the user is told on
/// stderr which one. None or several is a usage error listing them (the first
/// [`MODELS_SHOWN`]); a server that cannot answer is the run's failure.
async fn pick_model(mut cfg: OpenAiConfig) -> Result<OpenAiConfig> {
    let ids = OpenAiModel::new(cfg.clone())
        .map_err(usage)?
        .served_models()
        .await?;
    let url = &cfg.base_url;
    match ids.as_slice() {
        [one] => {
            eprintln!(
                "model: {} (the one model {url} serves; pass --model to choose)",
                shown_id(one)
            );
            cfg.model = one.clone();
            Ok(cfg)
        }
        [] => Err(usage(format!(
            "no model given, and the server at {url} lists none: pass --model NAME"
        ))),
        many => {
            let mut shown: Vec<String> = many
                .iter()
                .take(MODELS_SHOWN)
                .map(|id| shown_id(id))
                .collect();
            if many.len() > MODELS_SHOWN {
                shown.push(format!("… ({} in all)", many.len()));
            }
            Err(usage(format!(
                "no model given, and the server at {url} serves {}: pass --model with one of: {}",
                many.len(),
                shown.join(", ")
            )))
        }
    }
}
