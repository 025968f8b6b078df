//! `tagloop prompt` and `tagloop tools`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use tagloop::agent::Preview;
use tagloop::llm::Prompt;

use super::options::RunOpts;
use super::output::stdout;
use super::run::read_task;
use super::setup::Setup;

/// `tagloop prompt`.
#[derive(Debug, Args)]
pub struct PromptArgs {
    /// The task (`-` reads stdin); without it, only the system prompt is shown
    pub task: Option<String>,
    /// Print every chat message as JSON instead of the system prompt
    #[arg(long)]
    pub messages: bool,
    /// Print the grammar (GBNF) turns are constrained with on servers that take one (with a task: the grammar its run gets, the files it names among the paths)
    #[arg(long)]
    pub show_grammar: bool,
    /// With --show-grammar: the grammar of the last turn at the step limit (a final answer only)
    #[arg(long, requires = "show_grammar")]
    pub final_only: bool,
    #[command(flatten)]
    pub opts: RunOpts,
}

/// `tagloop tools`.
#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// Print a JSON array of {name, description, parameters}
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub opts: RunOpts,
}

pub async fn prompt(args: PromptArgs) -> Result<ExitCode> {
    let setup = Setup::build(&args.opts, false).await?;
    let task = match args.task.as_deref() {
        Some(t) => read_task(Some(t))?,
        None => String::new(),
    };
    if args.show_grammar {
        // With a task, the grammar its run gets: the files it names are among the paths.
        let grammar = tagloop::agent::preview_grammar_for(
            &setup.tools,
            &setup.role,
            &setup.config,
            args.final_only,
            &task,
        );
        setup.shutdown().await;
        write!(stdout(), "{grammar}")?;
        return Ok(ExitCode::SUCCESS);
    }
    let rendered = tagloop::agent::preview(
        &setup.tools,
        &setup.role,
        &setup.templates,
        &setup.config,
        &task,
        &setup.context,
    );
    setup.shutdown().await;
    let text = match rendered? {
        Preview {
            first: Prompt::Text(text),
            ..
        } => text,
        Preview {
            system,
            first: Prompt::Chat(messages),
        } => {
            if args.messages {
                serde_json::to_string_pretty(&messages)? + "\n"
            } else {
                system
            }
        }
    };
    write!(stdout(), "{text}")?;
    Ok(ExitCode::SUCCESS)
}

pub async fn tools(args: ToolsArgs) -> Result<ExitCode> {
    let setup = Setup::build(&args.opts, false).await?;
    let listed = list_tools(&setup, args.json);
    setup.shutdown().await;
    listed?;
    Ok(ExitCode::SUCCESS)
}

/// Write the tools of `setup` on stdout: one JSON array, or two lines per tool.
fn list_tools(setup: &Setup, json: bool) -> Result<()> {
    let mut out = stdout();
    if json {
        let list: Vec<_> = setup
            .tools
            .iter()
            .map(|t| json!({"name": t.name(), "description": t.description(), "parameters": t.parameters()}))
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&list)?)?;
    } else {
        for t in setup.tools.iter() {
            let params: Vec<String> = t
                .parameters()
                .get("properties")
                .and_then(|p| p.as_object())
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            writeln!(out, "{}({})", t.name(), params.join(", "))?;
            writeln!(out, "    {}", t.description().lines().next().unwrap_or(""))?;
        }
    }
    Ok(())
}
