//! MCP servers as tool sources (rmcp 3.x client over a child process's stdio).
//!
//! [`McpSource::start`] runs a server from a command line, initialises the session, lists the
//! server's tools and offers each as a tagloop [`Tool`] named `SERVER.TOOL`: SERVER is the name the
//! server gives in its initialisation (or the command's file name), TOOL the server's tool name;
//! in both, characters outside `[A-Za-z0-9_]` become `_` (SPEC §3). The parameters are the
//! server's own input schema, property order kept.
//!
//! Failure handling: a server that cannot be started, does not initialise in time, or answers
//! with something that is not MCP gives an [`McpError`]. Once running, every failure of a call
//! (timeout, server error, crash, malformed reply) becomes a [`ToolError`] the model sees; a
//! server that has exited makes every later call fail at once with a message saying so (and the
//! last lines it wrote to stderr).
//!
//! # Command lines
//!
//! The command line is split like a POSIX shell would split it, without running a shell: words
//! are separated by spaces; `'…'` quotes literally; `"…"` quotes with `\"`, `\\`, `\$` and `` \` ``
//! as escapes; a backslash outside quotes escapes the next character. Leading `NAME=value` words
//! set environment variables for the server. There is no globbing, no `$VAR` expansion, no pipes
//! or redirections (`sh -c '…'` gives you those).
//!
//! # Environment and lifetime
//!
//! The server gets [`McpOptions::env`]'s environment ([`ChildEnv`]: no key tagloop knows of; the
//! command line's own `NAME=value` words and [`ChildEnv::set`] are the user's explicit choice and
//! are applied last). It runs as a [`Job`]: its orphans are killed when the source goes, and it
//! dies with tagloop (see [`super::children`]).
//!
//! # Gates
//!
//! A tool is *read-only* when the user says so for the whole server ([`McpAccess::ReadOnly`]) or,
//! by default ([`McpAccess::Annotations`]), when the server annotates it `readOnlyHint: true`.
//! Every other tool may change things: it is offered only with [`McpOptions::allow_write`], and
//! [`McpOptions::confirm`] is asked before each call of it. The server's own annotation is trusted
//! because the server is a program the user chose to run with their own rights: a lying server
//! needs no tool call to do harm, while the gate exists to stop the *model* from changing things
//! through an honest server. [`McpAccess::Write`] treats every tool as a writer, for servers the
//! user would rather not take at their word.

use std::collections::{HashSet, VecDeque};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use serde_json::{Map, Value};
use tokio::io::AsyncBufReadExt;

use super::children::{ChildEnv, Job};
use super::confirm::Confirm;
use super::{Tool, ToolError};

/// How many lines of the server's stderr are kept for error messages.
const STDERR_TAIL_LINES: usize = 20;

/// Why an MCP server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The command line is empty or badly quoted.
    #[error("bad MCP server command line `{command}`: {reason}")]
    CommandLine {
        /// The command line.
        command: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The program could not be started (not found, not executable, …).
    #[error("cannot start MCP server `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Initialisation or tool listing took longer than the start timeout.
    #[error("MCP server `{command}` did not start within {timeout:?}{stderr}")]
    StartTimeout {
        /// The command line.
        command: String,
        /// The timeout.
        timeout: Duration,
        /// The last lines of the server's stderr (formatted, may be empty).
        stderr: String,
    },
    /// The server exited or answered something that is not an MCP initialisation.
    #[error("MCP server `{command}` failed to initialise: {message}{stderr}")]
    Initialize {
        /// The command line.
        command: String,
        /// What went wrong.
        message: String,
        /// The last lines of the server's stderr (formatted, may be empty).
        stderr: String,
    },
    /// The server initialised but could not list its tools.
    #[error("MCP server `{command}` could not list its tools: {message}{stderr}")]
    ListTools {
        /// The command line.
        command: String,
        /// What went wrong.
        message: String,
        /// The last lines of the server's stderr (formatted, may be empty).
        stderr: String,
    },
}

/// Which tools of a server count as read-only (see the module docs, "Gates").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum McpAccess {
    /// A tool is read-only when the server annotates it `readOnlyHint: true`.
    #[default]
    Annotations,
    /// Every tool is read-only (the user vouches for the server).
    ReadOnly,
    /// Every tool may write, whatever the server says.
    Write,
}

/// Options of an MCP source.
#[derive(Clone)]
pub struct McpOptions {
    /// The SERVER part of the tool names; default: the server's own name, else the command's file
    /// name. Sanitised like the server's name.
    pub name: Option<String>,
    /// Time allowed for starting, initialising and listing tools.
    pub start_timeout: Duration,
    /// Time allowed for each tool call.
    pub call_timeout: Duration,
    /// The server's environment (default: tagloop's minus the keys [`ChildEnv::new`] knows).
    pub env: ChildEnv,
    /// Which tools are read-only.
    pub access: McpAccess,
    /// Offer the tools that are not read-only (default: no, like the built-in write tools).
    pub allow_write: bool,
    /// Asked before each call of a tool that is not read-only.
    pub confirm: Option<Arc<dyn Confirm>>,
}

impl std::fmt::Debug for McpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpOptions")
            .field("name", &self.name)
            .field("start_timeout", &self.start_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("env", &self.env)
            .field("access", &self.access)
            .field("allow_write", &self.allow_write)
            .field("confirm", &self.confirm.is_some())
            .finish()
    }
}

impl Default for McpOptions {
    fn default() -> Self {
        McpOptions {
            name: None,
            start_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
            env: ChildEnv::new(),
            access: McpAccess::Annotations,
            allow_write: false,
            confirm: None,
        }
    }
}

type Tail = Arc<Mutex<VecDeque<String>>>;

fn tail_text(tail: &Tail) -> String {
    let lines = tail
        .lock()
        .map(|t| t.iter().cloned().collect::<Vec<_>>())
        .unwrap_or_default();
    if lines.is_empty() {
        String::new()
    } else {
        format!("; its stderr ended with:\n{}", lines.join("\n"))
    }
}

struct Conn {
    server: String,
    command: String,
    peer: Peer<RoleClient>,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, ()>>>,
    shut_down: AtomicBool,
    stderr: Tail,
    call_timeout: Duration,
    confirm: Option<Arc<dyn Confirm>>,
    /// Kills the server's orphans when the connection goes.
    _job: Job,
}

impl Conn {
    fn gone(&self) -> ToolError {
        ToolError::Failed(format!(
            "MCP server `{}` is not running any more (it exited or its connection broke){}",
            self.server,
            tail_text(&self.stderr)
        ))
    }
}

/// A running MCP server and the tools it offers.
pub struct McpSource {
    conn: Arc<Conn>,
    tools: Vec<Arc<dyn Tool>>,
    withheld: Vec<String>,
}

impl std::fmt::Debug for McpSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSource")
            .field("name", &self.conn.server)
            .field("command", &self.conn.command)
            .field(
                "tools",
                &self
                    .tools
                    .iter()
                    .map(|t| t.name().to_string())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl McpSource {
    /// Start the server given by `command_line`, initialise it and list its tools, all within
    /// `timeout`; tool calls get the default per-call timeout ([`McpOptions::default`]).
    pub async fn start(command_line: &str, timeout: Duration) -> Result<McpSource, McpError> {
        let opts = McpOptions {
            start_timeout: timeout,
            ..McpOptions::default()
        };
        Self::start_with(command_line, opts).await
    }

    /// Start a server with explicit options.
    pub async fn start_with(command_line: &str, opts: McpOptions) -> Result<McpSource, McpError> {
        let command = command_line.to_string();
        let CommandLine { env, argv } =
            split_command_line(command_line).map_err(|reason| McpError::CommandLine {
                command: command.clone(),
                reason,
            })?;
        let (program, args) = argv.split_first().ok_or_else(|| McpError::CommandLine {
            command: command.clone(),
            reason: "it names no program".to_string(),
        })?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args);
        opts.env.apply(&mut cmd);
        // The command line's own assignments are the user's explicit choice: applied last.
        cmd.envs(env).kill_on_drop(true);
        let job = Job::new("mcp");
        let (transport, stderr) = job
            .spawn(cmd, |cmd| {
                let (transport, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::piped())
                    .spawn()?;
                let pid = transport.id();
                Ok(((transport, stderr), pid))
            })
            .map_err(|source| McpError::Spawn {
                command: command.clone(),
                source,
            })?;
        let tail: Tail = Arc::new(Mutex::new(VecDeque::new()));
        let stderr_done = Arc::new(tokio::sync::Notify::new());
        if let Some(stderr) = stderr {
            let tail = Arc::clone(&tail);
            let done = Arc::clone(&stderr_done);
            let label = command.clone();
            tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(server = %label, "mcp stderr: {line}");
                    if let Ok(mut t) = tail.lock() {
                        if t.len() == STDERR_TAIL_LINES {
                            t.pop_front();
                        }
                        t.push_back(line);
                    }
                }
                done.notify_waiters();
                done.notify_one();
            });
        }
        // Give a dying server a moment to finish writing why, for the error message.
        let stderr_after_failure = |tail: Tail, done: Arc<tokio::sync::Notify>| async move {
            let _ = tokio::time::timeout(Duration::from_millis(500), done.notified()).await;
            tail_text(&tail)
        };

        let started = tokio::time::timeout(opts.start_timeout, async {
            let service = ().serve(transport).await.map_err(|e| (true, e.to_string()))?;
            let tools = service
                .peer()
                .list_all_tools()
                .await
                .map_err(|e| (false, e.to_string()))?;
            Ok::<_, (bool, String)>((service, tools))
        })
        .await;
        let (service, remote_tools) = match started {
            Err(_) => {
                return Err(McpError::StartTimeout {
                    command,
                    timeout: opts.start_timeout,
                    stderr: tail_text(&tail),
                });
            }
            Ok(Err((during_init, message))) => {
                let stderr = stderr_after_failure(Arc::clone(&tail), stderr_done).await;
                return Err(if during_init {
                    McpError::Initialize {
                        command,
                        message,
                        stderr,
                    }
                } else {
                    McpError::ListTools {
                        command,
                        message,
                        stderr,
                    }
                });
            }
            Ok(Ok(x)) => x,
        };

        let server_name = opts
            .name
            .clone()
            .or_else(|| {
                service
                    .peer()
                    .peer_info()
                    .and_then(|i| i.server_info.as_ref().map(|s| s.name.clone()))
                    .filter(|n| !n.trim().is_empty())
            })
            .unwrap_or_else(|| {
                Path::new(program)
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "mcp".to_string())
            });
        let server = sanitize(&server_name);
        let conn = Arc::new(Conn {
            server: server.clone(),
            command,
            peer: service.peer().clone(),
            service: tokio::sync::Mutex::new(Some(service)),
            shut_down: AtomicBool::new(false),
            stderr: tail,
            call_timeout: opts.call_timeout,
            confirm: opts.confirm.clone(),
            _job: job,
        });
        let mut withheld = Vec::new();
        let mut seen = HashSet::new();
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for t in remote_tools {
            let mut local = format!("{server}.{}", sanitize(&t.name));
            let base = local.clone();
            let mut n = 2;
            while !seen.insert(local.clone()) {
                local = format!("{base}_{n}");
                n += 1;
            }
            let mut parameters = Value::Object((*t.input_schema).clone());
            if let Some(obj) = parameters.as_object_mut()
                && !obj.contains_key("type")
            {
                obj.insert("type".to_string(), Value::String("object".to_string()));
            }
            let read_only = match opts.access {
                McpAccess::ReadOnly => true,
                McpAccess::Write => false,
                McpAccess::Annotations => t
                    .annotations
                    .as_ref()
                    .and_then(|a| a.read_only_hint)
                    .unwrap_or(false),
            };
            if !read_only && !opts.allow_write {
                withheld.push(local);
                continue;
            }
            let description = t
                .description
                .as_deref()
                .or(t.title.as_deref())
                .unwrap_or("")
                .to_string();
            tools.push(Arc::new(McpTool {
                local,
                remote: t.name.to_string(),
                description,
                parameters,
                read_only,
                conn: Arc::clone(&conn),
            }));
        }
        tracing::info!(server = %server, tools = tools.len(), "MCP server started");
        if !withheld.is_empty() {
            tracing::warn!(
                "MCP server `{server}`: {} tool(s) that may change things are not offered without --allow-write: {} (if the server only reads, start it with --mcp-read-only instead of --mcp)",
                withheld.len(),
                withheld.join(", ")
            );
        }
        Ok(McpSource {
            conn,
            tools,
            withheld,
        })
    }

    /// The tools the server offers that were not offered to the model because they may change
    /// things and writes are not allowed (`SERVER.TOOL` names).
    pub fn withheld(&self) -> &[String] {
        &self.withheld
    }

    /// The SERVER part of the tool names.
    pub fn name(&self) -> &str {
        &self.conn.server
    }

    /// The server's tools, named `SERVER.TOOL`. They keep the connection alive while they exist.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools.clone()
    }

    /// Whether the server's connection is still open.
    pub fn is_running(&self) -> bool {
        !self.conn.shut_down.load(Ordering::SeqCst) && !self.conn.peer.is_transport_closed()
    }

    /// Close the session and stop the server: stdin is closed, then (after a grace period) the
    /// server is sent `SIGTERM` and finally killed. Later calls of its tools fail with a clear
    /// message. Dropping the source and all its tools without calling this also stops the
    /// server, in the background.
    pub async fn shutdown(&self) {
        self.conn.shut_down.store(true, Ordering::SeqCst);
        let service = self.conn.service.lock().await.take();
        if let Some(mut service) = service {
            match service.close_with_timeout(Duration::from_secs(10)).await {
                Ok(Some(reason)) => {
                    tracing::debug!(server = %self.conn.server, "MCP server closed: {reason:?}")
                }
                Ok(None) => {
                    tracing::warn!(server = %self.conn.server, "MCP server did not close in time")
                }
                Err(e) => tracing::warn!(server = %self.conn.server, "MCP close failed: {e}"),
            }
        }
    }
}

struct McpTool {
    local: String,
    remote: String,
    description: String,
    parameters: Value,
    /// Whether the tool counts as read-only (no confirmation asked).
    read_only: bool,
    conn: Arc<Conn>,
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.local
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn call(&self, args: Map<String, Value>) -> BoxFuture<'_, Result<String, ToolError>> {
        Box::pin(async move {
            let conn = &self.conn;
            if conn.shut_down.load(Ordering::SeqCst) {
                return Err(ToolError::Failed(format!(
                    "MCP server `{}` was shut down",
                    conn.server
                )));
            }
            if conn.peer.is_transport_closed() {
                return Err(conn.gone());
            }
            if !self.read_only
                && let Some(c) = &conn.confirm
            {
                let shown = serde_json::to_string(&args).unwrap_or_default();
                let what = format!(
                    "{}: MCP tool of server `{}` that may change things\n  arguments: {}",
                    self.local,
                    conn.server,
                    preview(&shown, 2000)
                );
                if !c.confirm(&what).await {
                    return Err(ToolError::Refused(
                        "the user declined this action; do not retry it, choose another way or give a final answer"
                            .to_string(),
                    ));
                }
            }
            let params = CallToolRequestParams::new(self.remote.clone()).with_arguments(args);
            let answer =
                tokio::time::timeout(conn.call_timeout, conn.peer.call_tool_once(params)).await;
            match answer {
                Err(_) => Err(ToolError::Timeout(conn.call_timeout)),
                Ok(Ok(CallToolResponse::Complete(result))) => render_result(result),
                Ok(Ok(_)) => Err(ToolError::Failed(format!(
                    "MCP server `{}` asked for more input or started a background task; tagloop does not support that",
                    conn.server
                ))),
                Ok(Err(ServiceError::McpError(e))) => Err(ToolError::Failed(format!(
                    "MCP server `{}` answered with an error: {}",
                    conn.server, e.message
                ))),
                Ok(Err(
                    ServiceError::TransportClosed
                    | ServiceError::TransportSend(_)
                    | ServiceError::Cancelled { .. },
                )) => Err(conn.gone()),
                Ok(Err(e)) => Err(ToolError::Failed(format!(
                    "MCP server `{}`: {e}",
                    conn.server
                ))),
            }
        })
    }
}

/// At most `max` bytes of `text` (cut at a character boundary, with a marker).
fn preview(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// The observation for a tool result: text blocks joined by newlines, other blocks described;
/// `is_error` makes it a [`ToolError::Failed`] with the same text.
fn render_result(result: CallToolResult) -> Result<String, ToolError> {
    let mut parts: Vec<String> = Vec::new();
    for block in &result.content {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::Image(i) => parts.push(format!(
                "[image: {}, {} bytes base64]",
                i.mime_type,
                i.data.len()
            )),
            ContentBlock::Audio(a) => parts.push(format!(
                "[audio: {}, {} bytes base64]",
                a.mime_type,
                a.data.len()
            )),
            ContentBlock::Resource(r) => match &r.resource {
                rmcp::model::ResourceContents::TextResourceContents { uri, text, .. } => {
                    parts.push(format!("[resource {uri}]\n{text}"));
                }
                rmcp::model::ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => parts.push(format!(
                    "[resource {uri}: {}, {} bytes base64]",
                    mime_type.as_deref().unwrap_or("binary"),
                    blob.len()
                )),
                other => parts.push(format!(
                    "[resource: {}]",
                    serde_json::to_string(other).unwrap_or_default()
                )),
            },
            ContentBlock::ResourceLink(link) => parts.push(format!(
                "[resource link: {}]",
                serde_json::to_string(link).unwrap_or_default()
            )),
            other => parts.push(format!(
                "[content: {}]",
                serde_json::to_string(other).unwrap_or_default()
            )),
        }
    }
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    if result.is_error == Some(true) {
        Err(ToolError::Failed(if text.is_empty() {
            "the tool reported an error without a message".to_string()
        } else {
            text
        }))
    } else {
        Ok(text)
    }
}

/// Replace characters outside `[A-Za-z0-9_]` by `_`; a leading digit gets a `_` in front; an
/// empty name becomes `mcp`.
pub fn sanitize(name: &str) -> String {
    let mut out: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() {
        out.push_str("mcp");
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// A command line split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    /// Leading `NAME=value` assignments, in order.
    pub env: Vec<(String, String)>,
    /// The program and its arguments (never empty).
    pub argv: Vec<String>,
}

/// Split a command line into leading `NAME=value` environment assignments and the argument
/// vector (see the module docs for the quoting rules).
pub fn split_command_line(line: &str) -> Result<CommandLine, String> {
    // (word, byte offset in the word where quoting or escaping first started)
    let mut words: Vec<(String, Option<usize>)> = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quoted: Option<usize> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push((std::mem::take(&mut cur), quoted));
                    in_word = false;
                    quoted = None;
                }
            }
            '\'' => {
                in_word = true;
                quoted = quoted.or(Some(cur.len()));
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err("unterminated single quote".to_string()),
                    }
                }
            }
            '"' => {
                in_word = true;
                quoted = quoted.or(Some(cur.len()));
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('"' | '\\' | '$' | '`')) => cur.push(e),
                            Some('\n') => {}
                            Some(other) => {
                                cur.push('\\');
                                cur.push(other);
                            }
                            None => return Err("unterminated double quote".to_string()),
                        },
                        Some(c) => cur.push(c),
                        None => return Err("unterminated double quote".to_string()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                quoted = quoted.or(Some(cur.len()));
                match chars.next() {
                    Some('\n') => {}
                    Some(c) => cur.push(c),
                    None => return Err("a backslash at the end".to_string()),
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push((cur, quoted));
    }
    let mut env = Vec::new();
    let mut argv = Vec::new();
    for (word, quoted_at) in words {
        if argv.is_empty()
            && let Some(eq) = word.find('=')
            && quoted_at.is_none_or(|q| eq < q)
            && let Some((k, v)) = word.split_once('=')
            && !k.is_empty()
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !k.starts_with(|c: char| c.is_ascii_digit())
        {
            env.push((k.to_string(), v.to_string()));
            continue;
        }
        argv.push(word);
    }
    if argv.is_empty() {
        return Err("it names no program".to_string());
    }
    Ok(CommandLine { env, argv })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_a_shell() {
        let CommandLine { env, argv } =
            split_command_line(r#"node "my dir/server.js" --root 'a b' x\ y"#).unwrap();
        assert!(env.is_empty());
        assert_eq!(argv, ["node", "my dir/server.js", "--root", "a b", "x y"]);
        let CommandLine { env, argv } =
            split_command_line(r#"DEBUG=1 A_B="x y" prog --k=v "e\"q""#).unwrap();
        assert_eq!(
            env,
            [("DEBUG".into(), "1".into()), ("A_B".into(), "x y".into())]
        );
        assert_eq!(argv, ["prog", "--k=v", "e\"q"]);
        assert!(split_command_line("prog 'open").is_err());
        assert!(split_command_line("   ").is_err());
        assert!(split_command_line("X=1").is_err());
        let argv = split_command_line("'' prog").unwrap().argv;
        assert_eq!(argv, ["", "prog"]);
    }

    #[test]
    fn sanitizes_names() {
        assert_eq!(
            sanitize("secure-filesystem-server"),
            "secure_filesystem_server"
        );
        assert_eq!(sanitize("fs.v2"), "fs_v2");
        assert_eq!(sanitize("9lives"), "_9lives");
        assert_eq!(sanitize(""), "mcp");
    }
}
