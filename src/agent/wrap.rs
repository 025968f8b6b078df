//! An external agent as a role (`tagloop wrap`): run a program on the task, and, when the role
//! has an output schema, have the model extract the typed result from what the program printed.
//!
//! The program gets the task (and the workflow context) on its standard input and in
//! `TAGLOOP_TASK`; its standard output is captured (bounded) with its exit code. Without a
//! schema, the output is the final answer and no model is called. With one, the model is asked
//! once, with no tools, to give the result as the final answer, which is validated (and
//! corrected) exactly as in a run. A program that fails (a non-zero exit, or the time limit, after
//! which its whole process tree is killed) ends the run with status `error` and the end of its
//! standard error. The transcript records the program, its output and the extraction.
//!
//! The command line is never stored nor shown whole: its arguments may hold secrets
//! (`--api-key=…`, a token after a flag), so the transcript, the error messages and the model's
//! question name the program and count its arguments only (`` `tool` (3 arguments) ``), as MCP
//! servers are recorded by name.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::prompt::ContextItem;
use crate::protocol;
use crate::tools::{ChildEnv, Registry};

use super::events::Event;
use super::{Agent, Outcome, Progress, RunOptions, Status};
use crate::shown::Outside;

/// The program [`Agent::wrap`] runs.
#[derive(Debug, Clone)]
pub struct WrapCommand {
    /// The program (run directly, looked up on `PATH`, no shell) then its arguments; an empty
    /// list ends the run with the error "no command to run".
    pub argv: Vec<String>,
    /// Its working directory.
    pub cwd: PathBuf,
    /// Time limit for the program.
    pub timeout: Duration,
    /// Bytes of its standard output kept (the first and last halves when it writes more).
    pub max_output: usize,
    /// Its environment: no key tagloop knows of (`TAGLOOP_TASK` is added).
    pub env: ChildEnv,
}

impl WrapCommand {
    /// A command with a 10-minute limit and 256 KiB of output, run in the current directory.
    pub fn new(argv: Vec<String>) -> Self {
        WrapCommand {
            argv,
            cwd: PathBuf::from("."),
            timeout: Duration::from_secs(600),
            max_output: 256 * 1024,
            env: ChildEnv::new(),
        }
    }
}

/// What [`Agent::wrap`] gives: the run's outcome, and how the program ended.
#[derive(Debug, Clone)]
pub struct Wrapped {
    /// As for a run: status, final answer, `steps` 0, `llm_calls` (0 without a schema), usage.
    pub outcome: Outcome,
    /// The program's exit code (`None`: it was killed, or never started).
    pub exit_code: Option<i32>,
    /// How long the program ran.
    pub seconds: f64,
}

/// Bytes of standard error quoted when a program fails.
const STDERR_TAIL: usize = 2000;

/// What the program reads: the task, then each piece of context under its name.
fn program_input(task: &str, context: &[ContextItem]) -> String {
    let mut s = task.to_string();
    for item in context {
        s.push_str(&format!("\n\n## {}\n{}", item.name, item.content));
    }
    s
}

/// Give an event to the caller and write it to the transcript (as a run does).
fn emit(options: &mut RunOptions, event: Event) {
    if let Some(sink) = &options.events {
        sink(&event);
    }
    if let Some(t) = options.transcript.as_mut()
        && let Err(e) = t.append(&event)
    {
        tracing::warn!(error = %Outside(&e), "the transcript could not be written");
    }
}

impl Agent {
    /// Run an external program on `task` and make its output this agent's role's result (see
    /// the module docs). The agent's tools are not offered to the extraction.
    pub async fn wrap(
        &self,
        task: &str,
        command: &WrapCommand,
        mut options: RunOptions,
    ) -> Wrapped {
        let Some((program, args)) = command.argv.split_first() else {
            return self.unwrapped(task, options, "no command to run".into(), None, 0.0);
        };
        let input = program_input(task, &options.context);
        let env = command.env.clone().set("TAGLOOP_TASK", task);
        let started = Instant::now();
        let run = crate::tools::run_process(crate::tools::Process {
            program,
            args,
            cwd: &command.cwd,
            timeout: command.timeout,
            cap: command.max_output,
            env: &env,
            stdin: Some(input.as_bytes()),
        })
        .await;
        let seconds = started.elapsed().as_secs_f64();
        let shown = shown(program, args.len());
        let out = match run {
            Ok(out) => out,
            Err(e) => {
                let msg = format!("cannot run {shown}: {e}");
                return self.unwrapped(task, options, msg, None, seconds);
            }
        };
        let record = json!({"program": program, "arguments": args.len(), "exit_code": out.code,
                            "seconds": seconds, "timed_out": out.timed_out});
        match &mut options.meta {
            Value::Object(m) => {
                m.insert("wrap".into(), record);
            }
            other => *other = json!({ "wrap": record }),
        }
        let stderr = out.stderr.render();
        let tail = clip_tail(stderr.trim_end(), STDERR_TAIL);
        if out.timed_out {
            let msg = format!(
                "{shown} did not finish within {} s and was killed with every process it started; the end of its standard error:\n{tail}",
                command.timeout.as_secs()
            );
            return self.unwrapped(task, options, msg, None, seconds);
        }
        if out.code != Some(0) {
            let how = match (out.code, out.signal) {
                (Some(c), _) => format!("exited with {c}"),
                (None, Some(s)) => format!("was killed by signal {s}"),
                (None, None) => "ended without an exit code".into(),
            };
            let msg = format!("{shown} {how}; the end of its standard error:\n{tail}");
            return self.unwrapped(task, options, msg, out.code, seconds);
        }
        let output = out.stdout.render();
        if self.role.output_schema().is_none() {
            return self.passthrough(task, options, output, seconds);
        }
        // The model reads the program's output as data: no tag in it can act as a protocol tag.
        let question = format!(
            "{task}\n\nThe program {shown} was run for this task. Everything it printed:\n\n{}\n\nGive the result of the task, as the program found it, as your final answer.",
            protocol::neutralise(&output)
        );
        let extractor = match Agent::builder(self.model.clone())
            .tools(Registry::new())
            .role(self.role.clone())
            .templates(self.templates.clone())
            .config(self.config.clone())
            .build()
        {
            Ok(a) => a,
            Err(e) => return self.unwrapped(task, options, e.to_string(), out.code, seconds),
        };
        options.context = Vec::new();
        let outcome = extractor.run_with(&question, options).await;
        Wrapped {
            outcome,
            exit_code: out.code,
            seconds,
        }
    }

    /// No model: the program's output is the final answer.
    fn passthrough(
        &self,
        task: &str,
        mut options: RunOptions,
        output: String,
        seconds: f64,
    ) -> Wrapped {
        self.started(task, &mut options);
        let answer = Value::String(output.trim_end().to_string());
        emit(
            &mut options,
            Event::Final {
                value: answer.clone(),
                warnings: Vec::new(),
            },
        );
        self.finish(options, Status::Ok, Some(answer), None, Some(0), seconds)
    }

    /// The program failed (or never ran): status `error`.
    fn unwrapped(
        &self,
        task: &str,
        mut options: RunOptions,
        error: String,
        exit_code: Option<i32>,
        seconds: f64,
    ) -> Wrapped {
        self.started(task, &mut options);
        self.finish(
            options,
            Status::Error,
            None,
            Some(error),
            exit_code,
            seconds,
        )
    }

    fn started(&self, task: &str, options: &mut RunOptions) {
        let session = options
            .transcript
            .as_ref()
            .map(|t| t.id().to_string())
            .unwrap_or_default();
        let meta = std::mem::take(&mut options.meta);
        emit(
            options,
            Event::RunStarted {
                session,
                task: task.to_string(),
                model: "(none: the wrapped program's output is the answer)".into(),
                api: self.config.api.as_str().to_string(),
                role: self.role.name().to_string(),
                max_steps: 0,
                started: crate::session::now_rfc3339(),
                meta,
                question: None,
            },
        );
    }

    fn finish(
        &self,
        mut options: RunOptions,
        status: Status,
        final_answer: Option<Value>,
        error: Option<String>,
        exit_code: Option<i32>,
        seconds: f64,
    ) -> Wrapped {
        let outcome = Outcome {
            status,
            final_answer,
            progress: Progress::default(),
            session: options.transcript.as_ref().map(|t| t.id().to_string()),
            error,
            messages: Vec::new(),
        };
        let json = serde_json::to_value(&outcome).unwrap_or(Value::Null);
        emit(&mut options, Event::Finished { outcome: json });
        Wrapped {
            outcome,
            exit_code,
            seconds,
        }
    }
}

/// How a program is named in messages and to the model: its name and how many arguments it
/// had, never the arguments themselves (they may hold secrets).
fn shown(program: &str, arguments: usize) -> String {
    match arguments {
        0 => format!("`{program}`"),
        1 => format!("`{program}` (1 argument)"),
        n => format!("`{program}` ({n} arguments)"),
    }
}

/// The last `max` characters of `s`.
fn clip_tail(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let kept: String = s.chars().skip(n - max).collect();
    format!("…{kept}")
}
