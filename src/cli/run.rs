//! `tagloop run` and `tagloop continue`.

use std::borrow::Cow;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use clap::Args;

use tagloop::agent::{Agent, Event, EventSink, Outcome, Resume, RunOptions, Status};
use tagloop::secret::Redactor;
use tagloop::session::{self, Transcript};

use super::live::{Live, one_line};
use super::options::{RunOpts, shell_word};
use super::output::{stdout, unless_reader_gone};
use super::setup::Setup;
use super::usage::usage;
use tagloop::shown::terminal_safe;

/// Output options of a run.
#[derive(Debug, Clone, Default, Args)]
pub struct OutputOpts {
    /// Print the outcome as one JSON object on stdout (and nothing else there)
    #[arg(long)]
    pub json: bool,
    /// Write every event as JSON Lines to FILE (`-` for stdout)
    #[arg(long, value_name = "FILE")]
    pub events: Option<String>,
    /// Where transcripts are written [default: the user's data dir] [env: TAGLOOP_SESSION_DIR]
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,
    /// Show only the one-line summary on stderr
    #[arg(long, short)]
    pub quiet: bool,
}

impl OutputOpts {
    /// `--session-dir`, else `TAGLOOP_SESSION_DIR`, else `<user data dir>/tagloop/sessions`; it
    /// may not exist yet (the first transcript creates it).
    pub fn session_dir(&self) -> PathBuf {
        super::session_dir::session_dir(self.session_dir.as_deref())
    }
}

/// `tagloop run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The task; `-` reads it from stdin
    #[arg(value_name = "TASK")]
    pub task: Option<String>,
    #[command(flatten)]
    pub opts: RunOpts,
    #[command(flatten)]
    pub out: OutputOpts,
}

/// `tagloop continue`.
#[derive(Debug, Args)]
pub struct ContinueArgs {
    /// The session: its id, the start of its id, `last` (the newest), or its transcript file
    pub session: String,
    /// A new user message: a follow-up question or a correction
    pub message: Option<String>,
    /// Go on from the end of step N, in a new session that copies the history up to it (the
    /// way past a damaged line in the middle of a transcript; the original file is left as it is)
    #[arg(long, value_name = "N")]
    pub from_step: Option<u64>,
    #[command(flatten)]
    pub opts: RunOpts,
    #[command(flatten)]
    pub out: OutputOpts,
}

/// Read the task from the argument or stdin.
pub fn read_task(task: Option<&str>) -> Result<String> {
    let task = match task {
        Some("-") => {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
                .map_err(|e| usage(format!("cannot read the task from stdin: {e}")))?;
            s
        }
        Some(t) => t.to_string(),
        None => {
            return Err(usage(
                "no task given: pass it as an argument, or `-` to read it from stdin",
            ));
        }
    };
    if task.trim().is_empty() {
        return Err(usage("the task is empty"));
    }
    Ok(task)
}

/// `tagloop run`. Everything that can refuse the run (the options, the model, the agent and its
/// prompt, the events file) is settled before its transcript is created, so a run that cannot
/// start leaves no session; once it has started, the transcript records how it ended, a failed
/// first request included (`tagloop sessions` lists it as `error`).
pub async fn run(args: RunArgs) -> Result<ExitCode> {
    let task = read_task(args.task.as_deref())?;
    let opts = args.opts.clone().absolutize();
    let setup = Setup::build(&opts, true).await?;
    let dir = args.out.session_dir();
    let result = async {
        let events = open_events(args.out.events.as_deref())?;
        let agent = setup.agent(setup.model(0)?)?;
        let transcript = new_transcript(&dir)?;
        let again = continue_command(&opts, &args.out, &transcript, &dir);
        let meta = setup.record(&opts);
        let run = Execution {
            agent,
            task: &task,
            transcript,
            meta,
            resume: None,
            again,
        };
        execute(&setup, run, &args.out, events).await
    }
    .await;
    setup.shutdown().await;
    result
}

/// `tagloop continue`.
pub async fn continue_run(args: ContinueArgs) -> Result<ExitCode> {
    let dir = args.out.session_dir();
    let path = session::resolve(&dir, &args.session).map_err(usage)?;
    let mut loaded = session::load(&path).map_err(usage)?;
    for w in &loaded.warnings {
        eprintln!("warning: {}", terminal_safe(w));
    }
    // Messages name the session by its id, whatever the user typed (`last`, a prefix).
    let args = ContinueArgs {
        session: path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| args.session.clone()),
        ..args
    };
    // A forked session (--from-step) is written to a new file; the original stays as it is.
    let fork = cut_at_step(&args, &mut loaded)?;
    let mut resume = Resume::from_records(&loaded.records)
        .map_err(|e| usage(format!("cannot continue {}: {e}", args.session)))?;
    if fork.is_some() {
        // What came after step N is not part of the fork, however the original run ended.
        resume.finished = None;
    }
    // A run that ended in a runtime error (the server went away) goes on like a killed one; a run
    // that ended otherwise needs a new message to go on.
    if let Some(status) = resume.finished.filter(|s| *s != Status::Error)
        && args.message.is_none()
    {
        return Err(usage(format!(
            "session {} already finished ({}); give a MESSAGE to continue it with a follow-up",
            one_line(&args.session),
            status.as_str()
        )));
    }
    resume.message = args.message.clone();
    let saved: RunOpts = serde_json::from_value(resume.meta.clone()).unwrap_or_default();
    let legacy_mcp: Vec<String> = resume
        .meta
        .get("mcp")
        .and_then(|m| m.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|c| c.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let (opts, notices) = args.opts.clone().restore(saved, &legacy_mcp);
    for n in notices {
        // The notices quote the session file (its URL, its workspace): made safe to print.
        eprintln!("note: {}", terminal_safe(&n));
    }
    let opts = opts.absolutize();
    let setup = Setup::build(&opts, true).await?;
    let result = async {
        let events = open_events(args.out.events.as_deref())?;
        let agent = setup.agent(setup.model(resume.requests as usize)?)?;
        let transcript = match fork {
            None => Transcript::open_append(&path).map_err(usage)?,
            Some(_) => fork_transcript(&dir, &loaded.records, &setup, &args)?,
        };
        let again = continue_command(&opts, &args.out, &transcript, &dir);
        let meta = setup.record(&opts);
        let task = resume.task.clone();
        let run = Execution {
            agent,
            task: &task,
            transcript,
            meta,
            resume: Some(resume),
            again,
        };
        execute(&setup, run, &args.out, events).await
    }
    .await;
    setup.shutdown().await;
    result
}

/// Refuse a history with a hole, or cut the records at `--from-step N`: `Some(cut)` when the
/// session is forked there (the records are truncated to it).
fn cut_at_step(args: &ContinueArgs, loaded: &mut session::Loaded) -> Result<Option<usize>> {
    let holes = session::holes(loaded);
    match (args.from_step, holes.first()) {
        (None, Some(h)) => Err(usage(format!(
            "cannot continue {}: line {} of its transcript is damaged, so the history of step \
             {} has a message missing. Continue from the last intact step with --from-step {} \
             (a new session is made from the steps before it; this file is left as it is), \
             or repair line {} by hand",
            args.session,
            h.line,
            h.step,
            h.step - 1,
            h.line
        ))),
        (Some(n), first_hole) => {
            if let Some(h) = first_hole.filter(|h| n >= h.step) {
                return Err(usage(format!(
                    "cannot continue {} from step {n}: line {} is damaged, so step {} and later \
                     are incomplete; use --from-step {} or lower",
                    args.session,
                    h.line,
                    h.step,
                    h.step - 1
                )));
            }
            let Some(cut) = session::records_through_step(&loaded.records, n) else {
                return Err(usage(format!(
                    "cannot continue {} from step {n}: the transcript has no completed step {n}",
                    args.session
                )));
            };
            loaded.records.truncate(cut);
            Ok(Some(cut))
        }
        (None, None) => Ok(None),
    }
}

/// A new session in `dir`; a folder that cannot be written is a usage error.
pub fn new_transcript(dir: &std::path::Path) -> Result<Transcript> {
    Transcript::create(dir, &session::new_id())
        .with_context(|| {
            format!(
                "cannot write sessions to {} (use --session-dir)",
                dir.display()
            )
        })
        .map_err(usage)
}

/// A new session holding the records through the forked step.
fn fork_transcript(
    dir: &std::path::Path,
    records: &[serde_json::Value],
    setup: &Setup,
    args: &ContinueArgs,
) -> Result<Transcript> {
    let mut t = new_transcript(dir)?.redacting(setup.redactor.clone());
    for r in records {
        t.append(r)?;
    }
    eprintln!(
        "note: continuing from step {} of {} in the new session {}",
        args.from_step.unwrap_or(0),
        args.session,
        t.id()
    );
    Ok(t)
}

/// One run, ready to go: everything [`execute`] needs besides the setup and the output options.
struct Execution<'a> {
    agent: Agent,
    task: &'a str,
    transcript: Transcript,
    meta: serde_json::Value,
    resume: Option<Resume>,
    /// The command that continues this run, shown when it is interrupted.
    again: String,
}

/// Run one agent with the live view, the events file and the transcript; print the outcome.
async fn execute(
    setup: &Setup,
    run: Execution<'_>,
    out: &OutputOpts,
    events_out: Option<EventsOut>,
) -> Result<ExitCode> {
    let transcript = run.transcript.redacting(setup.redactor.clone());
    let sink = event_sink(setup, out, events_out);
    let options = RunOptions {
        context: setup.context.clone(),
        events: Some(sink),
        transcript: Some(transcript),
        meta: run.meta,
        resume: run.resume,
    };
    let outcome = tokio::select! {
        // Ctrl-C first: a run that ends in the same poll (its tool was just killed by the signal
        // handler in `cli::main`) still counts as interrupted.
        biased;
        _ = tokio::signal::ctrl_c() => {
            // `select!` has dropped the run by now, and with it the transcript, which writes
            // what it had staged when dropped: every completed step is on disk.
            eprintln!("interrupted: the transcript holds every completed step");
            eprintln!("continue with: {}", run.again);
            setup.shutdown().await;
            return Ok(ExitCode::from(130));
        }
        o = run.agent.run_with(run.task, options) => o,
    };
    let outcome = redact_outcome(outcome, &setup.redactor);
    // The run's status makes the exit code; a reader that left (`| head`) does not change it.
    unless_reader_gone(print_outcome(&outcome, out.json))?;
    Ok(exit_code(&outcome))
}

/// The command line that continues the run written to `transcript`: its id (or its path when it
/// lies outside the session folder), the session folder when a flag chose it, and every option
/// `continue` needs restated ([`RunOpts::restate_flags`]). Made safe to print on a terminal.
fn continue_command(
    opts: &RunOpts,
    out: &OutputOpts,
    transcript: &Transcript,
    dir: &std::path::Path,
) -> String {
    let session = if transcript.path().parent() == Some(dir) {
        transcript.id().to_string()
    } else {
        transcript.path().display().to_string()
    };
    let mut words = vec![
        "tagloop".to_string(),
        "continue".to_string(),
        shell_word(&session),
    ];
    if let Some(d) = &out.session_dir {
        words.push("--session-dir".into());
        words.push(shell_word(&d.display().to_string()));
    }
    words.extend(opts.restate_flags());
    terminal_safe(&words.join(" ")).into_owned()
}

/// Where a run's events go: the live view on stderr, and `--events` as JSON Lines, every known
/// secret removed.
pub fn event_sink(setup: &Setup, out: &OutputOpts, events_out: Option<EventsOut>) -> EventSink {
    let live = Arc::new(Live::new(out.quiet));
    let redactor = setup.redactor.clone();
    Arc::new(move |e: &Event| {
        let Some(e) = redact_event(&redactor, e) else {
            return;
        };
        let e = e.as_ref();
        live.show(e);
        if let Some(w) = &events_out
            && let Ok(mut w) = w.lock()
            && let Ok(line) = serde_json::to_string(e)
        {
            let _ = writeln!(w, "{line}");
            let _ = w.flush();
        }
    })
}

/// The event with every known secret removed (defence in depth: the model client and the agent
/// redact at the source); `None` in the unlikely case the redacted event no longer reads back.
fn redact_event<'a>(redactor: &Redactor, e: &'a Event) -> Option<Cow<'a, Event>> {
    if redactor.is_empty() {
        return Some(Cow::Borrowed(e));
    }
    let mut value = serde_json::to_value(e).ok()?;
    if !redactor.finds(&value.to_string()) {
        return Some(Cow::Borrowed(e));
    }
    redactor.redact_json(&mut value);
    serde_json::from_value(value).ok().map(Cow::Owned)
}

/// The outcome with every known secret removed from its error and final answer.
pub fn redact_outcome(mut outcome: Outcome, redactor: &Redactor) -> Outcome {
    if redactor.is_empty() {
        return outcome;
    }
    outcome.error = outcome.error.map(|e| redactor.redact_string(e));
    if let Some(v) = outcome.final_answer.as_mut() {
        redactor.redact_json(v);
    }
    outcome
}

/// Where `--events` lines go.
pub type EventsOut = Arc<Mutex<Box<dyn Write + Send>>>;

pub fn open_events(path: Option<&str>) -> Result<Option<EventsOut>> {
    let Some(path) = path else { return Ok(None) };
    let w: Box<dyn Write + Send> = if path == "-" {
        Box::new(std::io::stdout())
    } else {
        Box::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create --events file {path}"))
                .map_err(usage)?,
        )
    };
    Ok(Some(Arc::new(Mutex::new(w))))
}

/// Print the outcome object on stdout when asked, else the final answer (so
/// `tagloop run … > answer.txt` works). A reader that went away is an error marked by
/// [`super::output`].
pub fn print_outcome(outcome: &Outcome, json: bool) -> Result<()> {
    let text = if json {
        serde_json::to_string(outcome)?
    } else {
        match &outcome.final_answer {
            None => return Ok(()),
            Some(serde_json::Value::String(s)) => terminal_safe(s).into_owned(),
            Some(v) => serde_json::to_string_pretty(v)?,
        }
    };
    writeln!(stdout(), "{text}")?;
    Ok(())
}

/// docs/protocol.md §2.2 exit codes.
pub fn exit_code(outcome: &Outcome) -> ExitCode {
    match outcome.status {
        Status::Ok => ExitCode::SUCCESS,
        Status::MaxSteps
        | Status::LoopDetected
        | Status::InvalidFinal
        | Status::ContextExceeded => ExitCode::from(3),
        Status::Error => ExitCode::from(1),
    }
}
