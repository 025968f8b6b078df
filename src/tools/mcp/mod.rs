//! MCP servers as tool sources (rmcp 3.x client over a child process's stdio).
//!
//! [`McpSource::start`] runs a server from a command line, initialises the session, lists the
//! server's tools and offers each as a tagloop [`Tool`] named `SERVER.TOOL`: SERVER is the name the
//! server gives in its initialisation (or the command's file name), TOOL the server's tool name;
//! in both, characters outside `[A-Za-z0-9_]` become `_` (docs/protocol.md §3). The parameters are the
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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::service::{Peer, RoleClient, RunningService};

use crate::tools::children::{ChildEnv, Job};
use crate::tools::confirm::Confirm;
use crate::tools::{Tool, ToolError};

mod command_line;
mod error;
mod start;
#[cfg(test)]
mod tests;
mod tool;

pub use error::McpError;

use crate::shown::Outside;

/// How many lines of the server's stderr are kept for error messages.
const STDERR_TAIL_LINES: usize = 20;

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

    /// The tools the server offers that were not offered to the model because they may change
    /// things and writes are not allowed (`SERVER.TOOL` names).
    pub fn withheld(&self) -> &[String] {
        &self.withheld
    }

    /// The file name of the program `command_line` runs, split as [`McpSource::start`] splits
    /// it: the only part of a server's command line that is safe to show (its arguments and
    /// `NAME=value` assignments may hold tokens). `None` when the line names no program.
    pub fn program_name(command_line: &str) -> Option<String> {
        command_line::program_name(command_line)
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
                    tracing::debug!(server = %self.conn.server, "MCP server closed: {}", Outside(format_args!("{reason:?}")))
                }
                Ok(None) => {
                    tracing::warn!(server = %self.conn.server, "MCP server did not close in time")
                }
                Err(e) => {
                    tracing::warn!(server = %self.conn.server, "MCP close failed: {}", Outside(&e))
                }
            }
        }
    }
}
