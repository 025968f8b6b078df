//! `tagloop batch INPUT --out OUTPUT`: many tasks, concurrently, resumable.
//!
//! INPUT is JSON Lines: `{"id": "t1", "task": "…"}`, optionally with `"role"` (a role file path
//! inside INPUT's folder, or an inline role object `{"name", "instructions", "output_schema"}`) and `"context"` (an array of
//! `{"name", "content"}`). Each result is appended to OUTPUT as one whole line, `{"id": …, <outcome
//! fields>}`, as soon as its task finishes; a rerun skips the ids OUTPUT already has, so a killed
//! batch resumes where it was.
//!
//! INPUT is checked whole before any task runs, and a bad line is a usage error (exit 2) that
//! names it: a line that is not a task, an empty task (refused as `run` refuses it), and an id
//! used twice. Ids are compared as text, because that is how a rerun matches them against
//! OUTPUT, so `1` and `"1"` are the same id and the error names both lines.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::sync::Mutex;

use tagloop::agent::{Event, Role, RunOptions, Status};
use tagloop::prompt::ContextItem;
use tagloop::session::{self, Transcript};

use super::options::RunOpts;
use super::session_dir::SessionArgs;
use super::setup::Setup;
use super::task_paths::TaskFolder;
use super::usage::usage;

/// `tagloop batch`.
#[derive(Debug, Args)]
pub struct BatchArgs {
    /// Tasks as JSON Lines: {"id": "...", "task": "..."}
    pub input: PathBuf,
    /// Results as JSON Lines, appended as each task finishes
    #[arg(long, value_name = "OUTPUT")]
    pub out: PathBuf,
    /// Tasks run at once
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub concurrency: usize,
    #[command(flatten)]
    pub sessions: SessionArgs,
    #[command(flatten)]
    pub opts: RunOpts,
}

#[derive(Debug, Deserialize)]
struct TaskLine {
    id: Value,
    task: String,
    #[serde(default)]
    role: Option<Value>,
    #[serde(default)]
    context: Option<Vec<ContextItem>>,
}

/// One task, read and checked.
pub(super) struct Task {
    pub id: Value,
    /// The id as text: what reruns and the queue match on.
    pub key: String,
    pub task: String,
    pub role: Option<Role>,
    /// How the task's role is written into its session, so `continue` uses the same one.
    pub role_meta: Option<(&'static str, Value)>,
    pub context: Option<Vec<ContextItem>>,
}

impl Task {
    /// The task as one self-contained JSON line (a role file is inlined), for the queue: a
    /// worker on another machine has no access to the pusher's files.
    pub fn to_line(&self) -> Value {
        let mut line = Map::new();
        line.insert("id".into(), self.id.clone());
        line.insert("task".into(), Value::String(self.task.clone()));
        if let Some(role) = &self.role {
            let mut r = Map::new();
            r.insert("name".into(), role.name().into());
            r.insert("instructions".into(), role.instructions().into());
            if let Some(schema) = role.output_schema() {
                r.insert("output_schema".into(), schema.clone());
            }
            line.insert("role".into(), Value::Object(r));
        }
        if let Some(context) = &self.context {
            line.insert(
                "context".into(),
                serde_json::to_value(context).unwrap_or(Value::Null),
            );
        }
        Value::Object(line)
    }
}

/// The id as text: `"1"` and `1` are the same id.
pub(super) fn id_key(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Check one task line. A role may be a file path (inside `base`, the task file's folder) only
/// when `base` is given: a task from the queue must carry its role inline.
pub(super) fn parse_task(t: Value, base: Option<&TaskFolder>) -> Result<Task> {
    let t: TaskLine = serde_json::from_value(t)
        .map_err(|e| anyhow::anyhow!("expected {{\"id\": …, \"task\": \"…\"}} ({e})"))?;
    let key = id_key(&t.id);
    if t.task.trim().is_empty() {
        anyhow::bail!("the task is empty");
    }
    let (role, role_meta) = match (t.role, base) {
        (None, _) => (None, None),
        (Some(Value::String(p)), Some(base)) => {
            let path = base
                .role_file(Path::new(&p))
                .with_context(|| format!("task {key}"))?;
            let role = Role::load(&path).with_context(|| format!("task {key}"))?;
            (
                Some(role),
                Some(("role", Value::String(path.display().to_string()))),
            )
        }
        (Some(Value::String(_)), None) => {
            anyhow::bail!("task {key}: a queued task's role must be inline, not a file path")
        }
        (Some(obj @ Value::Object(_)), _) => {
            let role = Role::from_inline(&obj).with_context(|| format!("task {key}"))?;
            (Some(role), Some(("role_inline", obj)))
        }
        (Some(_), _) => anyhow::bail!("task {key}: role must be a file path or an object"),
    };
    Ok(Task {
        role_meta,
        id: t.id,
        key,
        task: t.task,
        role,
        context: t.context,
    })
}

/// Read and check INPUT whole: a bad line, an empty task or an id used twice is an error naming
/// the line. Role files are found in INPUT's folder, and must be inside it (symlinks resolved).
pub(super) fn read_tasks(path: &Path) -> Result<Vec<Task>> {
    let base = TaskFolder::of(path, "the task file's folder")?;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    // Text of the id -> (line number, the id as written), to name both lines of a collision.
    let mut seen: HashMap<String, (usize, Value)> = HashMap::new();
    let mut tasks = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{} line {}", path.display(), i + 1);
        let value: Value = serde_json::from_str(line)
            .with_context(|| format!("{}: expected {{\"id\": …, \"task\": \"…\"}}", at()))?;
        let t = parse_task(value, Some(&base)).with_context(at)?;
        if let Some((first, earlier)) = seen.get(&t.key) {
            let how = if *earlier == t.id {
                "appears twice".to_string()
            } else {
                format!("is the same as the id {earlier} (ids are compared as text)")
            };
            anyhow::bail!(
                "{}: the id {} {how}; first used on line {first}",
                at(),
                t.id
            );
        }
        seen.insert(t.key.clone(), (i + 1, t.id.clone()));
        tasks.push(t);
    }
    Ok(tasks)
}

/// The ids OUTPUT already has; a damaged last line (a kill mid-write) is ended so new lines start clean.
fn done_ids(out: &Path) -> Result<HashSet<String>> {
    let mut done = HashSet::new();
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .open(out)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(done),
        Err(e) => return Err(e).with_context(|| format!("cannot open {}", out.display())),
    };
    // Bytes, not a string: a kill can cut a line inside a multi-byte character.
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", out.display()))?;
    for line in bytes.split(|b| *b == b'\n') {
        if let Ok(v) = serde_json::from_slice::<Value>(line)
            && let Some(id) = v.get("id")
        {
            done.insert(id_key(id));
        }
    }
    if bytes.last().is_some_and(|b| *b != b'\n') {
        file.seek(SeekFrom::End(0))?;
        file.write_all(b"\n")?;
    }
    Ok(done)
}

/// Let a large batch open as many files and sockets as the hard limit allows.
pub(super) fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max.min(1 << 20);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

pub async fn batch(args: BatchArgs) -> Result<ExitCode> {
    raise_fd_limit();
    if args.concurrency == 0 {
        return Err(usage("--concurrency must be at least 1"));
    }
    let tasks = read_tasks(&args.input).map_err(usage)?;
    let done = done_ids(&args.out).map_err(usage)?;
    let todo: Vec<Task> = tasks
        .into_iter()
        .filter(|t| !done.contains(&t.key))
        .collect();
    let opts = args.opts.clone().absolutize();
    let setup = Arc::new(Setup::build(&opts, true).await?);
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.out)
        .with_context(|| format!("cannot write {}", args.out.display()))
        .map_err(usage)?;
    let out = Arc::new(Mutex::new(out));
    let session_dir = args.sessions.dir();
    let total = todo.len() as u64;
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} done · {msg} · {per_sec} · eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    if !done.is_empty() {
        eprintln!(
            "{} tasks already in {}: skipped",
            done.len(),
            args.out.display()
        );
    }
    let failed = Arc::new(AtomicU64::new(0));
    let tokens = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let meta = setup.record(&opts);
    let mut results = futures::stream::iter(todo.into_iter().map(|task| {
        let setup = setup.clone();
        let out = out.clone();
        let session_dir = session_dir.clone();
        let meta = meta.clone();
        let (failed, tokens, bar) = (failed.clone(), tokens.clone(), bar.clone());
        async move {
            let result = run_task(&setup, task, session_dir.as_deref(), meta, &out).await;
            match &result {
                Ok((status, used)) => {
                    if *status != Status::Ok {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                    tokens.fetch_add(*used, Ordering::Relaxed);
                }
                Err(_) => {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
            bar.inc(1);
            bar.set_message(format!(
                "{} not ok · {} tokens",
                failed.load(Ordering::Relaxed),
                tokens.load(Ordering::Relaxed)
            ));
            result
        }
    }))
    .buffer_unordered(args.concurrency);
    let mut write_error = None;
    while let Some(r) = results.next().await {
        if let Err(e) = r {
            write_error.get_or_insert(e);
        }
    }
    bar.finish_and_clear();
    setup.shutdown().await;
    if let Some(e) = write_error {
        return Err(e);
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "batch: {total} tasks run ({} not ok) in {secs:.1} s, {:.1} tasks/s, {} tokens; results in {}",
        failed.load(Ordering::Relaxed),
        if secs > 0.0 { total as f64 / secs } else { 0.0 },
        tokens.load(Ordering::Relaxed),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Run one task and append its line. An error here is a failure to write OUTPUT.
async fn run_task(
    setup: &Setup,
    task: Task,
    session_dir: Option<&Path>,
    meta: Value,
    out: &Mutex<std::fs::File>,
) -> Result<(Status, u64)> {
    let key = task.key.clone();
    let (status, used, line) = run_one(setup, task, session_dir, meta).await?;
    let mut bytes = serde_json::to_vec(&line)?;
    bytes.push(b'\n');
    let mut f = out.lock().await;
    f.write_all(&bytes)
        .with_context(|| format!("cannot append the result of task {key}"))?;
    f.flush()?;
    Ok((status, used))
}

/// Run one task as `batch` does and return its status, the tokens it used and its result line
/// (`{"id": …, <outcome fields>}`).
pub(super) async fn run_one(
    setup: &Setup,
    task: Task,
    session_dir: Option<&Path>,
    meta: Value,
) -> Result<(Status, u64, Value)> {
    let mut meta = meta;
    if let (Some((field, value)), Some(obj)) = (&task.role_meta, meta.as_object_mut()) {
        obj.insert(field.to_string(), value.clone());
    }
    let outcome = match setup.task_agent(task.role.clone()) {
        Ok(agent) => {
            let transcript =
                session_dir.and_then(|d| Transcript::create(d, &session::new_id()).ok());
            // Requests fitted into the context window: a count in the task's line.
            let fits = Arc::new(AtomicU32::new(0));
            let counter = fits.clone();
            let events: tagloop::agent::EventSink = Arc::new(move |e: &Event| {
                if matches!(e, Event::ContextFitted { .. }) {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            });
            let options = RunOptions {
                events: Some(events),
                context: task
                    .context
                    .clone()
                    .unwrap_or_else(|| setup.context.clone()),
                transcript,
                meta,
                ..RunOptions::default()
            };
            let mut result = agent.run_with(&task.task, options).await;
            result.messages.clear();
            let mut value = serde_json::to_value(&result)?;
            if let Value::Object(fields) = &mut value {
                fields.insert("context_fits".into(), fits.load(Ordering::Relaxed).into());
            }
            (result.status, value)
        }
        Err(e) => (
            Status::Error,
            serde_json::json!({"status": "error", "final": null, "steps": 0, "llm_calls": 0, "tools_used": [],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0}, "session": null, "error": e.to_string()}),
        ),
    };
    let (status, value) = outcome;
    let used = value
        .get("usage")
        .map(|u| {
            u["prompt_tokens"].as_u64().unwrap_or(0) + u["completion_tokens"].as_u64().unwrap_or(0)
        })
        .unwrap_or(0);
    let mut line = Map::new();
    line.insert("id".into(), task.id);
    if let Value::Object(fields) = value {
        line.extend(fields);
    }
    Ok((status, used, Value::Object(line)))
}
