//! `tagloop queue push|status|results`: fill a shared Redis queue and read what workers stored.
//!
//! The queue itself (keys, scripts, guarantees) is `tagloop::queue`; `tagloop worker` (worker.rs)
//! runs the tasks.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use tagloop::queue::{Queue, QueueError, QueueUrl};
use tagloop::secret::Secret;

use super::batch::read_tasks;
use super::live::one_line;
use super::usage::usage;

/// The variable a queue password may come from, so it stays off command lines.
pub const PASSWORD_VAR: &str = "TAGLOOP_REDIS_PASSWORD";

/// Where the queue is.
#[derive(Debug, Clone, Args)]
pub struct QueueArg {
    /// The queue: redis://[:PASSWORD@]HOST[:PORT]/NAME[?db=N] (the password may instead come
    /// from TAGLOOP_REDIS_PASSWORD)
    #[arg(
        long,
        value_name = "URL",
        env = "TAGLOOP_QUEUE",
        hide_env_values = true
    )]
    pub queue: String,
}

impl QueueArg {
    /// Parse the address (a usage error when it is bad) and add the password from the
    /// environment when the URL has none.
    pub fn url(&self) -> Result<QueueUrl> {
        let env = std::env::var(PASSWORD_VAR).ok().map(Secret::new);
        Ok(QueueUrl::parse(&self.queue)
            .map_err(usage)?
            .or_password(env))
    }

    /// A handle on the queue at [`url`](Self::url)'s address (a usage error when it is bad).
    pub fn open(&self) -> Result<Queue> {
        Ok(Queue::new(self.url()?)?)
    }
}

/// `tagloop queue`.
#[derive(Debug, Args)]
pub struct QueueArgs {
    #[command(subcommand)]
    command: QueueCommand,
}

#[derive(Debug, Subcommand)]
enum QueueCommand {
    /// Push tasks from JSON Lines (batch's format); ids already queued, running or done are skipped
    Push(PushArgs),
    /// Count queued, running, done and failed tasks, and the workers seen
    Status(StatusArgs),
    /// Write every stored result as JSON Lines (batch's format), atomically
    Results(ResultsArgs),
}

#[derive(Debug, Args)]
struct PushArgs {
    /// Tasks as JSON Lines: {"id": "...", "task": "...", "role"?, "context"?}
    input: PathBuf,
    #[command(flatten)]
    queue: QueueArg,
}

#[derive(Debug, Args)]
struct StatusArgs {
    #[command(flatten)]
    queue: QueueArg,
    /// One JSON object on stdout
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ResultsArgs {
    #[command(flatten)]
    queue: QueueArg,
    /// Where to write the results (replaced whole, never half-written)
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

/// Run a `queue` subcommand.
pub async fn queue(args: QueueArgs) -> Result<ExitCode> {
    match args.command {
        QueueCommand::Push(a) => push(a).await,
        QueueCommand::Status(a) => status(a).await,
        QueueCommand::Results(a) => results(a).await,
    }
}

async fn push(args: PushArgs) -> Result<ExitCode> {
    let queue = args.queue.open()?;
    // Every line is checked before anything is pushed.
    let tasks = read_tasks(&args.input).map_err(usage)?;
    let lines: Vec<_> = tasks.iter().map(|t| (t.key.clone(), t.to_line())).collect();
    let report = match queue.push(&lines).await {
        // A task too large for the queue is a bad line, like any other: a usage error.
        Err(e @ QueueError::TaskTooLarge { .. }) => return Err(usage(e)),
        other => other?,
    };
    eprintln!(
        "pushed {} tasks to {} ({} skipped: already queued, running or done)",
        report.added,
        queue.shown(),
        report.skipped
    );
    Ok(ExitCode::SUCCESS)
}

async fn status(args: StatusArgs) -> Result<ExitCode> {
    let queue = args.queue.open()?;
    let s = queue.status().await?;
    let mut out = super::output::stdout();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&s)?)?;
    } else {
        // Worker names are whatever was written to Redis: anyone who can write there could put
        // escape sequences in one. They are shown escaped here and exact in --json.
        let names: Vec<_> = s.worker_names.iter().map(|n| one_line(n)).collect();
        writeln!(
            out,
            "{}: {} queued, {} running, {} done, {} failed; {} workers seen{}",
            one_line(queue.shown()),
            s.queued,
            s.running,
            s.done,
            s.failed,
            s.workers,
            if names.is_empty() {
                String::new()
            } else {
                format!(" ({})", names.join(", "))
            }
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn results(args: ResultsArgs) -> Result<ExitCode> {
    let queue = args.queue.open()?;
    let rows = queue.results().await?;
    let dir = match args.out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // A temporary file beside OUT, renamed over it: a reader never sees half a file.
    let mut tmp = tempfile::NamedTempFile::new_in(&dir)
        .with_context(|| format!("cannot write in {}", dir.display()))
        .map_err(usage)?;
    {
        let mut w = std::io::BufWriter::new(tmp.as_file_mut());
        for row in &rows {
            serde_json::to_writer(&mut w, row)?;
            w.write_all(b"\n")?;
        }
        w.flush()?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(&args.out)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    eprintln!(
        "{} results from {} written to {}",
        rows.len(),
        queue.shown(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
