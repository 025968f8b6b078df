//! `tagloop wrap`: an external agent (any program) as a role.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use tagloop::agent::{RunOptions, WrapCommand};
use tagloop::llm::{DeltaSink, LlmError, Model, TurnFuture, TurnRequest};

use super::options::RunOpts;
use super::run::{OutputOpts, event_sink, exit_code, new_transcript, open_events, redact_outcome};
use super::setup::Setup;
use super::usage::usage;

/// `tagloop wrap`.
#[derive(Debug, Args)]
pub struct WrapArgs {
    /// The task; `-` reads it from stdin
    #[arg(long, value_name = "TEXT")]
    pub task: String,
    /// Time limit for the command, in seconds; on expiry it and every process it started are killed
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub timeout: u64,
    /// Bytes of the command's standard output kept (its first and last halves when it writes more)
    #[arg(long, value_name = "BYTES", default_value_t = 256 * 1024)]
    pub max_output: usize,
    /// The command's working directory [default: the workspace, or .]
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    #[command(flatten)]
    pub opts: RunOpts,
    #[command(flatten)]
    pub out: OutputOpts,
    /// The command and its arguments (after `--`)
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// The model of a wrap whose role has no schema: never called.
struct NoModel;

impl Model for NoModel {
    fn turn<'a>(&'a self, _request: &'a TurnRequest, _on_delta: DeltaSink<'a>) -> TurnFuture<'a> {
        Box::pin(async {
            Err(LlmError::Config(
                "no model: give --model to extract a typed result".into(),
            ))
        })
    }

    fn describe(&self) -> String {
        "(none)".into()
    }
}

pub async fn wrap(args: WrapArgs) -> Result<ExitCode> {
    let task = super::run::read_task(Some(&args.task))?;
    if task.trim().is_empty() {
        return Err(usage("the task is empty"));
    }
    let mut opts = args.opts.clone().absolutize();
    // The wrapped program does the work: the extraction gets no tools.
    opts.no_builtin_tools = true;
    if !opts.mcp.is_empty() || !opts.mcp_read_only.is_empty() {
        return Err(usage("wrap offers no tools: --mcp does not apply"));
    }
    let mut setup = Setup::build(&opts, false).await?;
    let schema = setup.role.output_schema().is_some();
    if schema && setup.model.is_none() {
        setup = Setup::build(&opts, true).await?;
    }
    let model: Arc<dyn Model> = if schema {
        setup.model(0)?
    } else {
        Arc::new(NoModel)
    };
    let agent = setup.agent(model)?;
    let dir = args.out.session_dir();
    let transcript = new_transcript(&dir)?.redacting(setup.redactor.clone());
    let events = open_events(args.out.events.as_deref())?;
    let options = RunOptions {
        context: setup.context.clone(),
        events: Some(event_sink(&setup, &args.out, events)),
        transcript: Some(transcript),
        meta: setup.record(&opts),
        resume: None,
    };
    let cwd = args
        .cwd
        .clone()
        .or_else(|| opts.workspace.clone())
        .unwrap_or_else(|| PathBuf::from("."));
    let command = WrapCommand {
        argv: args.command.clone(),
        cwd,
        timeout: Duration::from_secs(args.timeout.max(1)),
        max_output: args.max_output.max(1),
        env: setup.child_env.clone(),
    };
    let wrapped = agent.wrap(&task, &command, options).await;
    let outcome = redact_outcome(wrapped.outcome, &setup.redactor);
    if args.out.json {
        let mut v = serde_json::to_value(&outcome)?;
        if let Some(m) = v.as_object_mut() {
            m.insert("exit_code".into(), serde_json::json!(wrapped.exit_code));
            m.insert("seconds".into(), serde_json::json!(wrapped.seconds));
        }
        let printed = writeln!(super::output::stdout(), "{v}").map_err(Into::into);
        super::output::unless_reader_gone(printed)?;
    } else {
        super::output::unless_reader_gone(super::run::print_outcome(&outcome, false))?;
    }
    Ok(exit_code(&outcome))
}
