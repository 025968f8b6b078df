//! Starting an MCP server: spawn it under a job (its environment without tagloop's keys, killed
//! with tagloop), keep the tail of its stderr for error messages, initialise the session and list
//! the tools within the start timeout, then offer each tool under the write gate.

use std::collections::{HashSet, VecDeque};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use super::command_line::{CommandLine, CommandLineError, sanitize, split_command_line};
use super::tool::McpTool;
use super::{Conn, McpAccess, McpError, McpOptions, McpSource, STDERR_TAIL_LINES, Tail, tail_text};
use crate::tools::Tool;
use crate::tools::children::Job;

use crate::shown::Outside;
use rmcp::model::Tool as RemoteTool;

/// A spawned server whose session is not initialised yet.
struct Spawned {
    transport: TokioChildProcess,
    tail: Tail,
    stderr_done: Arc<tokio::sync::Notify>,
    job: Job,
}

impl McpSource {
    /// Start a server with explicit options.
    pub async fn start_with(command_line: &str, opts: McpOptions) -> Result<McpSource, McpError> {
        let command = command_line.to_string();
        let bad = |reason| McpError::CommandLine {
            command: command.clone(),
            reason,
        };
        let CommandLine { env, argv } = split_command_line(command_line).map_err(bad)?;
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| bad(CommandLineError::NoProgram))?;
        let spawned = spawn(&command, program, args, env, &opts)?;
        let (service, remote_tools) = initialise(
            &command,
            spawned.transport,
            &spawned.tail,
            spawned.stderr_done,
            opts.start_timeout,
        )
        .await?;
        let server = sanitize(&server_name(&opts, &service, program));
        let conn = Arc::new(Conn {
            server: server.clone(),
            command,
            peer: service.peer().clone(),
            service: tokio::sync::Mutex::new(Some(service)),
            shut_down: AtomicBool::new(false),
            stderr: spawned.tail,
            call_timeout: opts.call_timeout,
            confirm: opts.confirm.clone(),
            _job: spawned.job,
        });
        let (tools, withheld) = offer(&server, remote_tools, &opts, &conn);
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
}

/// Spawn the server as a child of a job, its stderr read line by line into a short tail.
fn spawn(
    command: &str,
    program: &str,
    args: &[String],
    env: Vec<(String, String)>,
    opts: &McpOptions,
) -> Result<Spawned, McpError> {
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
            command: command.to_string(),
            source,
        })?;
    let tail: Tail = Arc::new(Mutex::new(VecDeque::new()));
    let stderr_done = Arc::new(tokio::sync::Notify::new());
    if let Some(stderr) = stderr {
        let tail = Arc::clone(&tail);
        let done = Arc::clone(&stderr_done);
        let label = command.to_string();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(server = %label, "mcp stderr: {}", Outside(&line));
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
    Ok(Spawned {
        transport,
        tail,
        stderr_done,
        job,
    })
}

/// Which step of [`initialise`] failed, with the client's error.
enum Failed {
    Initialize(Box<rmcp::service::ClientInitializeError>),
    ListTools(Box<rmcp::ServiceError>),
}

/// Initialise the session and list the server's tools, within `timeout`.
async fn initialise(
    command: &str,
    transport: TokioChildProcess,
    tail: &Tail,
    stderr_done: Arc<tokio::sync::Notify>,
    timeout: Duration,
) -> Result<(RunningService<RoleClient, ()>, Vec<RemoteTool>), McpError> {
    let started = tokio::time::timeout(timeout, async {
        let service = ().serve(transport).await.map_err(|e| Failed::Initialize(Box::new(e)))?;
        let tools = service
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| Failed::ListTools(Box::new(e)))?;
        Ok::<_, Failed>((service, tools))
    })
    .await;
    let command = command.to_string();
    match started {
        Err(_) => Err(McpError::StartTimeout {
            command,
            timeout,
            stderr: tail_text(tail),
        }),
        Ok(Err(failed)) => {
            // Give a dying server a moment to finish writing why, for the error message.
            let _ = tokio::time::timeout(Duration::from_millis(500), stderr_done.notified()).await;
            let stderr = tail_text(tail);
            Err(match failed {
                Failed::Initialize(source) => McpError::Initialize {
                    command,
                    source,
                    stderr,
                },
                Failed::ListTools(source) => McpError::ListTools {
                    command,
                    source,
                    stderr,
                },
            })
        }
        Ok(Ok(x)) => Ok(x),
    }
}

/// The server's name: the one the user gave, else the one the server gives, else the program's
/// file name.
fn server_name(
    opts: &McpOptions,
    service: &RunningService<RoleClient, ()>,
    program: &str,
) -> String {
    opts.name
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
        })
}

/// Wrap the server's tools as `SERVER.TOOL` (names made unique); a tool that may change things
/// is withheld unless writes are allowed. Returns the offered tools and the withheld names.
fn offer(
    server: &str,
    remote_tools: Vec<RemoteTool>,
    opts: &McpOptions,
    conn: &Arc<Conn>,
) -> (Vec<Arc<dyn Tool>>, Vec<String>) {
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
            conn: Arc::clone(conn),
        }));
    }
    (tools, withheld)
}
