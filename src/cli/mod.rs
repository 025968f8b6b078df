//! The `tagloop` commands (in progress).

pub mod parse;

use clap::Parser as _;

/// The command line.
#[derive(Debug, clap::Parser)]
#[command(
    name = "tagloop",
    version,
    about = "A runtime for ReAct agents that speak a text protocol"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Read one model turn and show how tagloop reads it.
    Parse(parse::ParseArgs),
}

pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Parse(args) => parse::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
