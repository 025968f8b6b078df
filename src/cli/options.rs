//! The options shared by `run`, `continue`, `batch`, `prompt` and `tools` (`setup.rs` turns them
//! into a model, tools, a role and an agent), what `continue` restores of them and what it must
//! be told again.
//!
//! Every option is optional here so that `continue` can tell what the user gave again from what
//! it restores from the session (flag > session > environment > `.env` > config file > default).
//! A session file may come from someone else, so `continue` restores only options that cannot
//! act on the machine or the key ([`RunOpts::restore`]); the one server address it reuses is a
//! loopback one, and no key is ever sent to it.

use std::path::PathBuf;

use clap::Args;
use serde::{Deserialize, Serialize};
use tagloop::tools::McpSource;

use super::loopback::{is_loopback_url, session_url_reusable};

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
    /// The older spelling of `--policy-off repeat` (the degeneration guard off), kept so that
    /// scripts written before the policies keep working; hidden from the help, which shows
    /// one flag per rule
    #[arg(long, hide = true)]
    pub keep_repetitions: bool,
    /// The older spelling of `--policy-off decide` (the first call runs without the decision
    /// step); hidden as `--keep-repetitions` is
    #[arg(long, hide = true)]
    pub no_decide: bool,
    /// Switch a steering rule off: a name of `tagloop policies`, a comma list, `all`, or `none`
    /// (on continue: none of the run's recorded ones); repeatable; adds to `[policies] off`
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    pub policy_off: Option<Vec<String>>,
    /// The policies switched off came from the continued session, which recorded the run's
    /// whole list (the config file's included), so the file adds nothing (not a flag)
    #[arg(skip)]
    #[serde(skip)]
    pub policies_from_session: bool,
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
    /// Continue chat turns with assistant prefill (llama.cpp, once detected, needs no flag; vLLM
    /// also needs --extra '{"continue_final_message": true, "add_generation_prompt": false}')
    #[arg(long)]
    pub prefill: bool,
    /// Constrain each turn with a grammar of the protocol over the real tools: auto (on llama.cpp,
    /// vLLM and SGLang, detected), on (every server not known to lack grammars), off [default: auto]
    #[arg(long, value_name = "MODE", value_parser = ["auto", "on", "off"])]
    pub grammar: Option<String>,
    /// The grammar syntax sent to llama.cpp: gbnf, or llguidance for a llama.cpp built with
    /// -DLLAMA_LLGUIDANCE=ON (a build without it aborts on such a grammar) [default: gbnf]
    #[arg(long, value_name = "SYNTAX", value_parser = ["gbnf", "llguidance"])]
    pub grammar_syntax: Option<String>,
    /// The server's kind, instead of detecting it: llama.cpp, vllm, sglang, ollama, openai, other
    #[arg(long, value_name = "KIND")]
    pub server: Option<String>,
    /// The model reasons before it answers (<think>): grammars leave its reasoning free
    #[arg(long)]
    pub reasoning: bool,
    /// The model's context window in tokens (prompt and turn together), instead of asking the
    /// server (llama.cpp's -c divided by --parallel, vLLM's max_model_len, Ollama's num_ctx);
    /// also gives a scripted model one [default: learned from the server]
    #[arg(long, value_name = "N", value_parser = parse_context_window)]
    pub context_window: Option<u64>,
    /// Send the whole history every turn, even past the context window (the server then refuses
    /// it, or cuts it from the front): no context fitting
    #[arg(long)]
    pub no_context_fit: bool,
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
    /// Ask for whole answers, never streamed (a server behind a proxy that buffers or refuses
    /// streams; stop strings stay enforced on tagloop's side)
    #[arg(long)]
    pub no_stream: bool,
    /// Extra vendor fields for every request body, as a JSON object,
    /// e.g. '{"continue_final_message": true, "add_generation_prompt": false}' for vLLM prefill
    #[arg(long, value_name = "JSON")]
    pub extra: Option<String>,
    /// The base URL is the one the continued session recorded (a loopback address, see
    /// [`RunOpts::restore`]): no key is sent to it, whatever the key rule allows a URL given
    /// as a flag (not a flag, not recorded)
    #[arg(skip)]
    #[serde(skip)]
    pub session_base_url: bool,
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
    /// workspace, a base URL that is not a loopback address, and `--extra` (a crafted session
    /// file would otherwise run a command, open a gate, move the workspace or send the user's
    /// key to its own server the moment it is continued). A loopback base URL (127.0.0.0/8,
    /// `::1`, `localhost`) is restored with [`RunOpts::session_base_url`] set, so that no key
    /// goes to it. Returns what was recorded but not restored, and the loopback URL when it is
    /// reused, as notices that say how to restate it. `legacy_mcp` is the `mcp` command lines
    /// older sessions stored: only their program names are shown. The notices quote the file:
    /// print them through `terminal_safe`.
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
        servers.extend(
            legacy_mcp
                .iter()
                .map(|c| McpSource::program_name(c).unwrap_or_else(|| "?".into())),
        );
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
            if session_url_reusable(url) {
                notices.push(format!(
                    "continuing with the session's server {url}, on this machine; no API key is sent to a server a session file names: restate it with --base-url {url} to send yours"
                ));
                self.base_url = Some(url.clone());
                self.session_base_url = true;
            } else if is_loopback_url(url) {
                notices.push(format!(
                    "the session's server {url} is on this machine, but is not an API root tagloop writes (user info, a query, a fragment or another path than /v1): restate it with --base-url {url} to use it"
                ));
            } else {
                notices.push(format!(
                    "the session used the server {url}; continue picks the server from your own flags, environment and config (a recorded one would receive your key): restate it with --base-url {url} to use it"
                ));
            }
        }
        // The run's own policies go on, unless the user says which are off now.
        if self.policy_off.is_none() && saved.policy_off.is_some() {
            self.policy_off = saved.policy_off.clone();
            self.policies_from_session = true;
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
            role_inline,
            grammar,
            server,
            context_window
        );
        // These only narrow what a run may do, or shape requests to the user's own server.
        self.confirm |= saved.confirm;
        self.no_builtin_tools |= saved.no_builtin_tools;
        self.no_usage |= saved.no_usage;
        self.no_stream |= saved.no_stream;
        self.prefill |= saved.prefill;
        self.no_server_stop |= saved.no_server_stop;
        self.keep_repetitions |= saved.keep_repetitions;
        self.no_decide |= saved.no_decide;
        self.no_context_fit |= saved.no_context_fit;
        self.reasoning |= saved.reasoning;
        (self, notices)
    }

    /// The options a `continue` of a run made with these (absolutized) options must be given
    /// again, from the same folder and environment, to go on as the run did: what
    /// [`RunOpts::restore`] does not restore (the gates, the MCP servers and the variables passed
    /// to them, the workspace when it is not the current folder, the base URL unless it came from
    /// the session itself, `--extra`) and what a session does not record (`--config`, the key).
    /// MCP commands and the key are placeholders (`'COMMAND'`, `KEY`): they may be secret and
    /// are never printed. Joined with spaces, they read as shell words (values quoted as needed).
    pub fn restate_flags(&self) -> Vec<String> {
        let mut words: Vec<String> = Vec::new();
        let mut flag = |name: &str, value: Option<&str>| {
            words.push(name.to_string());
            if let Some(v) = value {
                words.push(shell_word(v));
            }
        };
        if self.allow_write {
            flag("--allow-write", None);
        }
        if self.allow_shell {
            flag("--allow-shell", None);
        }
        // Quoted as the user will have to quote the command line that replaces it.
        for _ in &self.mcp {
            flag("--mcp 'COMMAND'", None);
        }
        for _ in &self.mcp_read_only {
            flag("--mcp-read-only 'COMMAND'", None);
        }
        for name in &self.mcp_env {
            flag("--mcp-env", Some(name));
        }
        let here = std::path::absolute(".").ok();
        if let Some(ws) = &self.workspace
            && here.as_ref() != Some(ws)
        {
            flag("--workspace", Some(&ws.display().to_string()));
        }
        // Restated even for a loopback server: with the flag, the continued run sends the key
        // this one sent (a URL from the session would get none).
        if let Some(url) = &self.base_url
            && !self.session_base_url
        {
            flag("--base-url", Some(url));
        }
        if let Some(extra) = &self.extra {
            flag("--extra", Some(extra));
        }
        if let Some(config) = &self.config {
            flag("--config", Some(&config.display().to_string()));
        }
        if self.api_key.is_some() {
            flag("--api-key", Some("KEY"));
        }
        words
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

/// `--context-window N`: a whole number of tokens, at least 1.
fn parse_context_window(value: &str) -> Result<u64, String> {
    match value.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        Ok(_) => {
            Err("the context window must be at least 1 token (e.g. --context-window 8192)".into())
        }
        Err(_) => Err(format!(
            "'{value}' is not a number of tokens (e.g. --context-window 8192)"
        )),
    }
}

/// `s` as one POSIX shell word (quoted by the `shlex` crate when a shell would read any of it
/// specially).
pub fn shell_word(s: &str) -> String {
    // With NUL allowed (no argument or path holds one), quoting has no error to return.
    shlex::Quoter::new()
        .allow_nul(true)
        .quote(s)
        .map(std::borrow::Cow::into_owned)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_url_is_restored_keyless_and_another_is_named() {
        let saved = RunOpts {
            base_url: Some("http://127.0.0.1:8080/v1".into()),
            ..RunOpts::default()
        };
        let (o, notes) = RunOpts::default().restore(saved.clone(), &[]);
        assert_eq!(o.base_url.as_deref(), Some("http://127.0.0.1:8080/v1"));
        assert!(o.session_base_url);
        assert!(notes[0].contains("no API key is sent"), "{notes:?}");
        // Given again as a flag, it is the user's: keys follow the key rule.
        let given = RunOpts {
            base_url: Some("http://127.0.0.1:8080/v1".into()),
            ..RunOpts::default()
        };
        let (o, _) = given.restore(saved, &[]);
        assert!(!o.session_base_url);
        let saved = RunOpts {
            base_url: Some("http://evil.example/v1".into()),
            ..RunOpts::default()
        };
        let (o, notes) = RunOpts::default().restore(saved, &[]);
        assert_eq!(o.base_url, None);
        assert!(notes[0].contains("--base-url http://evil.example/v1"));
    }

    #[test]
    fn an_old_sessions_mcp_command_shows_only_its_program() {
        let legacy = [r#"TOKEN=sk-1 "/opt/my tools/mcp server" --key sk-2"#.to_string()];
        let (_, notes) = RunOpts::default().restore(RunOpts::default(), &legacy);
        assert!(notes[0].contains("1 MCP server (mcp server)"), "{notes:?}");
        assert!(!notes[0].contains("sk-"), "{notes:?}");
    }

    #[test]
    fn restated_flags_are_shell_words_and_hide_secrets() {
        let opts = RunOpts {
            allow_shell: true,
            mcp: vec!["srv --token sk-secret".into()],
            workspace: Some("/tmp/my work".into()),
            base_url: Some("http://127.0.0.1:8080/v1".into()),
            extra: Some(r#"{"top_k": 20}"#.into()),
            api_key: Some("sk-secret".into()),
            ..RunOpts::default()
        };
        let line = opts.restate_flags().join(" ");
        assert_eq!(
            line,
            r#"--allow-shell --mcp 'COMMAND' --workspace '/tmp/my work' --base-url http://127.0.0.1:8080/v1 --extra '{"top_k": 20}' --api-key KEY"#
        );
        assert_eq!(shell_word("it's"), r#""it's""#);
        for tricky in ["it's", "$HOME `x` \\", "a\"b'c", "~/x y", "#x", "!"] {
            assert_eq!(shlex::split(&shell_word(tricky)).unwrap(), [tricky]);
        }
        assert_eq!(shell_word(""), "''");
        assert_eq!(
            shell_word("20261125-200703-17381-0"),
            "20261125-200703-17381-0"
        );
        // A URL the session gave is not restated: continue takes it from the session again.
        let from_session = RunOpts {
            base_url: Some("http://127.0.0.1:8080/v1".into()),
            session_base_url: true,
            ..RunOpts::default()
        };
        assert!(from_session.restate_flags().is_empty());
    }
}
