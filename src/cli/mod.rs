//! The `tagloop` command line: one file per command; this file only dispatches.

mod batch;
mod config;
mod eval;
#[cfg(test)]
mod eval_examples;
mod eval_suite;
mod inspect;
mod live;
mod log_writer;
mod loopback;
mod options;
mod output;
mod parse;
mod policies;
mod queue;
mod replay_html;
mod run;
mod serve;
mod serve_config;
mod session_dir;
mod sessions;
mod setup;
mod target;
mod task_paths;
mod usage;
mod worker;
mod wrap;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// tagloop: ReAct agents over a text protocol, on any OpenAI-compatible server or none.
#[derive(Debug, Parser)]
#[command(name = "tagloop", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run an agent on a task
    Run(run::RunArgs),
    /// Read one model turn (FILE or stdin) and show how tagloop parses it
    Parse(parse::ParseArgs),
    /// Print what the model would receive (the system prompt for chat, the full text for completions)
    Prompt(inspect::PromptArgs),
    /// List the tools the options enable
    Tools(inspect::ToolsArgs),
    /// List saved sessions, newest first
    Sessions(sessions::SessionsArgs),
    /// Show a saved session, or write it as one HTML page
    Replay(sessions::ReplayArgs),
    /// Go on from the last complete step of a saved session, optionally with a new message
    Continue(run::ContinueArgs),
    /// Run many tasks from JSON Lines, concurrently; a rerun skips finished ids
    Batch(batch::BatchArgs),
    /// Push tasks to a shared Redis queue, count them, collect their results
    Queue(queue::QueueArgs),
    /// Take tasks from a shared Redis queue and run them, as batch does, until stopped
    Worker(worker::WorkerArgs),
    /// Run an external program (an agent CLI) on a task and make its output the role's result
    Wrap(wrap::WrapArgs),
    /// Run a suite of checked tasks and report pass rate, readable turns, steps, tokens, time
    Eval(eval::EvalArgs),
    /// An OpenAI-compatible endpoint: tools in, the text protocol to the upstream, tool_calls out
    Serve(serve::ServeArgs),
    /// List the steering rules `--policy-off` and `[policies] off` can switch off
    Policies(policies::PoliciesArgs),
    /// Print shell completions
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: clap_complete::Shell,
    },
}

/// Run the command line and map errors to the exit codes of docs/protocol.md §2.2: 2 for usage and configuration, 1 for
/// runtime failures. A command whose reader went away (`tagloop sessions | head -3`) ends
/// quietly with 0 ([`output`]).
pub fn main() -> ExitCode {
    init_tracing();
    // Before any thread or child exists: /proc/<tagloop>/environ and mem out of reach of the
    // (same-user) children, and every descendant re-parented to tagloop rather than to init.
    if let Err(e) = tagloop::tools::harden_process() {
        tracing::warn!("cannot protect tagloop's process from its children: {e}");
    }
    // Whatever way main is left (a return, an error, a panic), no descendant stays behind; it is
    // dropped after the runtime.
    let _descendants = KillDescendantsOnExit;
    let cli = Cli::parse();
    let runtime = match runtime() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async {
        tagloop::tools::spawn_orphan_reaper();
        // A worker handles its signals itself: it stops taking tasks and hands running ones back.
        if !matches!(cli.command, Command::Worker(_) | Command::Serve(_)) {
            tokio::spawn(exit_on_signal());
        }
        // The command runs as a task of its own, not as the future `block_on` drives: on the
        // one-thread runtime, every wake-up of the `block_on` future costs a trip to the I/O
        // driver first (an extra `epoll_wait` per streamed event), a task's costs nothing.
        match tokio::spawn(command(cli.command)).await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(anyhow::anyhow!("the command was cancelled: {e}")),
        }
    });
    // MCP children and streams are dropped with the runtime; do not wait for stuck tasks.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    match result {
        Ok(code) => code,
        Err(e) if output::reader_gone(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "error: {}",
                tagloop::shown::terminal_safe(&format!("{e:#}"))
            );
            if e.downcast_ref::<usage::UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// The variable that asks for a multi-threaded runtime (`TAGLOOP_THREADS=N`, N ≥ 2).
const THREADS_VAR: &str = "TAGLOOP_THREADS";

/// The async runtime: one thread unless `TAGLOOP_THREADS` asks for more.
///
/// An agent's work between two model calls is small (a turn parsed, a tool called, a line
/// written), so one thread carries a thousand concurrent tasks with CPU to spare, and costs far
/// less than handing every event between threads (experiments.md, "CPU per step"). File tools and other
/// blocking work still run on tokio's blocking pool. Only a batch whose tools do heavy work inside
/// the async tasks (rare: MCP servers and commands are other processes) gains from more threads.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let threads = std::env::var(THREADS_VAR)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(1);
    if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    }
}

/// Run one command.
async fn command(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(a) => run::run(a).await,
        Command::Parse(a) => parse::run(&a),
        Command::Prompt(a) => inspect::prompt(a).await,
        Command::Tools(a) => inspect::tools(a).await,
        Command::Sessions(a) => sessions::sessions(a),
        Command::Replay(a) => sessions::replay(a),
        Command::Continue(a) => run::continue_run(a).await,
        Command::Batch(a) => batch::batch(a).await,
        Command::Eval(a) => eval::eval(a).await,
        Command::Serve(a) => serve::serve(a).await,
        Command::Wrap(a) => wrap::wrap(a).await,
        Command::Queue(a) => queue::queue(a).await,
        Command::Worker(a) => worker::worker(a).await,
        Command::Policies(a) => policies::list(a),
        Command::Completions { shell } => {
            // Into memory first: `generate` panics when its writer fails (a closed pipe).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "tagloop", &mut script);
            std::io::Write::write_all(&mut output::stdout(), &script)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Kills every descendant when dropped (at the end of `main`, also when unwinding from a panic).
struct KillDescendantsOnExit;

impl Drop for KillDescendantsOnExit {
    fn drop(&mut self) {
        tagloop::tools::kill_all_descendants();
    }
}

/// On SIGTERM, SIGHUP or SIGINT: kill every descendant, then exit with 128 + the signal. Without
/// this the signal would end tagloop at once and leave the commands it started (in their own
/// process groups, so the terminal's Ctrl-C does not reach them) running. On SIGINT, `run` and
/// `continue` get a second to say where the transcript stops and return by themselves.
async fn exit_on_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hup), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::warn!("cannot install signal handlers; children may outlive a signalled tagloop");
        return;
    };
    let (name, number): (&str, u8) = tokio::select! {
        _ = term.recv() => ("SIGTERM", 15),
        _ = hup.recv() => ("SIGHUP", 1),
        _ = int.recv() => ("SIGINT", 2),
    };
    tracing::info!("{name} received: stopping every process tagloop started");
    let _ = tokio::task::spawn_blocking(tagloop::tools::kill_all_descendants).await;
    if number == 2 {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    std::process::exit(128 + i32::from(number));
}

/// Logs go to stderr (stdout carries machine output), tuned with `RUST_LOG` (default: warnings,
/// but not the ones the live view already shows as notices), each on a line of its own.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        let quiet_notices = format!(
            "warn,{}=off,tagloop::serve=info",
            tagloop::llm::NOTICE_LOG_TARGET
        );
        tracing_subscriber::EnvFilter::new(quiet_notices)
    });
    // Colours only on a terminal, never with NO_COLOR: logs redirected to a file stay plain.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(log_writer::LogWriter)
        .with_target(false)
        .try_init();
}
