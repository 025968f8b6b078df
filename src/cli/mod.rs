//! The `tagloop` command line: one file per command; this file only dispatches.

mod batch;
mod config;
mod inspect;
mod live;
mod options;
mod parse;
mod run;
mod sessions;

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
    /// Print shell completions
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: clap_complete::Shell,
    },
}

/// Run the command line and map errors to SPEC exit codes: 2 for usage and configuration, 1 for
/// runtime failures.
pub fn main() -> ExitCode {
    init_tracing();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(a) => run::run(a).await,
            Command::Parse(a) => parse::run(&a),
            Command::Prompt(a) => inspect::prompt(a).await,
            Command::Tools(a) => inspect::tools(a).await,
            Command::Sessions(a) => sessions::sessions(a),
            Command::Replay(a) => sessions::replay(a),
            Command::Continue(a) => run::continue_run(a).await,
            Command::Batch(a) => batch::batch(a).await,
            Command::Completions { shell } => {
                clap_complete::generate(
                    shell,
                    &mut Cli::command(),
                    "tagloop",
                    &mut std::io::stdout(),
                );
                Ok(ExitCode::SUCCESS)
            }
        }
    });
    // MCP children and streams are dropped with the runtime; do not wait for stuck tasks.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<options::UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// Logs go to stderr (stdout carries machine output), tuned with `RUST_LOG` (default: warnings).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
