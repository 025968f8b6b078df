//! `tagloop eval SUITE`: run a suite of checked tasks and measure how well a model, a prompt or a
//! setting does: pass rate, readable-turn rate, steps, tokens and time.
//!
//! Every `run` option applies to every task; `--repeat N` runs each task N times. A run passes when
//! the agent ends `ok` and every check of its task passes. A turn is *readable* when the runtime
//! did not answer it with a format correction (`parse_error`, `no_decision`, `truncated`,
//! `repetition`): a turn
//! that names an unknown tool or bad arguments was still read, so it counts as readable.
//!
//! Output: a progress bar on stderr, then a table on stdout, or with `--json` exactly one JSON
//! report on stdout. Exit 0 when the suite ran, whatever it scored, unless `--min-pass-rate R` is
//! given and the pass rate is below it (exit 3). A suite that cannot be read is exit 2.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use tagloop::agent::{Event, EventSink, RunOptions, Status};
use tagloop::session::{self, Transcript};

use super::eval_suite::{EvalTask, read_suite, select};
use super::options::RunOpts;
use super::output::stdout;
use super::session_dir::SessionArgs;
use super::setup::Setup;
use super::task_paths::{copy_workspace, fresh_workspace, scratch_in_use};
use super::usage::usage;

#[path = "eval_print.rs"]
mod print;
use print::{print_comparison, print_table};

/// `tagloop eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The suite: JSON Lines of {"id", "task", "check"} (see docs/lab.md)
    pub suite: PathBuf,
    /// Run each task N times
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub repeat: u32,
    /// Run only the tasks with these ids (comma-separated, repeatable), in the suite's order
    #[arg(long, value_name = "ID,ID", value_delimiter = ',')]
    pub only: Vec<String>,
    /// Run only the first N tasks (of those --only picked)
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Runs at once (1 measures seconds per turn without runs competing for the server)
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub concurrency: usize,
    /// The JSON report, and nothing else, on stdout
    #[arg(long)]
    pub json: bool,
    /// Exit 3 when the pass rate (0 to 1) is below this
    #[arg(long, value_name = "R")]
    pub min_pass_rate: Option<f64>,
    /// Run the suite twice, without a grammar and then with one (--grammar, or auto), and
    /// report both side by side: {"without_grammar": REPORT, "with_grammar": REPORT,
    /// "comparison": {completion_tokens_per_turn, seconds_per_turn, readable_turn_rate, pass_rate}}
    #[arg(long)]
    pub compare_grammar: bool,
    /// Make each task's fresh workspace DIR/task-HASH (a hash of its id) instead of a random
    /// temporary folder: the prompt, which names it, is then the same on every run (docs/lab.md)
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    #[command(flatten)]
    pub sessions: SessionArgs,
    #[command(flatten)]
    pub opts: RunOpts,
}

/// One run of one task, as the report lists it.
#[derive(Debug, Clone, Serialize)]
struct RunReport {
    id: String,
    run: u32,
    status: Status,
    passed: bool,
    /// Why it did not pass (the first failed check, or the error).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    steps: u32,
    turns: u32,
    /// Turns a grammar constrained.
    constrained_turns: u32,
    format_corrections: u32,
    /// Requests fitted into the model's context window (`context_fitted` events).
    context_fits: u32,
    /// Prompt and completion tokens, as the server counted them.
    tokens: u64,
    /// The tokens the model wrote (what a grammar makes longer or shorter).
    completion_tokens: u64,
    seconds: f64,
    session: Option<String>,
}

/// The whole report (`--json`).
#[derive(Debug, Clone, Serialize)]
struct Report {
    suite: String,
    model: String,
    /// The grammar mode asked for (`auto`, `on`, `off`).
    grammar: String,
    /// Runs made: tasks × repeat.
    tasks: usize,
    passed: usize,
    pass_rate: f64,
    readable_turn_rate: f64,
    /// The share of turns a grammar constrained.
    constrained_turn_rate: f64,
    turns: u64,
    steps: u64,
    tokens: u64,
    /// The tokens the models wrote, all runs.
    completion_tokens: u64,
    /// `completion_tokens / turns`: what a turn costs to sample, the figure a grammar moves.
    completion_tokens_per_turn: f64,
    seconds: f64,
    seconds_per_turn: f64,
    results: Vec<RunReport>,
}

/// `--compare-grammar`: the constrained run's figures over the free run's, side by side.
#[derive(Debug, Clone, Serialize)]
struct Comparison {
    /// Completion tokens per turn, constrained ÷ free.
    completion_tokens_per_turn: f64,
    /// Seconds per turn, constrained ÷ free.
    seconds_per_turn: f64,
    /// Readable-turn rate, free then constrained.
    readable_turn_rate: [f64; 2],
    /// Pass rate, free then constrained.
    pass_rate: [f64; 2],
}

impl Comparison {
    /// `b` (with a grammar) against `a` (without); a ratio over zero is 0.
    fn of(a: &Report, b: &Report) -> Self {
        let ratio = |x: f64, y: f64| if y > 0.0 { x / y } else { 0.0 };
        Comparison {
            completion_tokens_per_turn: ratio(
                b.completion_tokens_per_turn,
                a.completion_tokens_per_turn,
            ),
            seconds_per_turn: ratio(b.seconds_per_turn, a.seconds_per_turn),
            readable_turn_rate: [a.readable_turn_rate, b.readable_turn_rate],
            pass_rate: [a.pass_rate, b.pass_rate],
        }
    }
}

/// Kinds of correction that mean the turn could not be read as the protocol.
const FORMAT_CORRECTIONS: [&str; 4] = ["parse_error", "no_decision", "truncated", "repetition"];

pub async fn eval(args: EvalArgs) -> Result<ExitCode> {
    if args.repeat == 0 || args.concurrency == 0 {
        return Err(usage("--repeat and --concurrency must be at least 1"));
    }
    if args
        .min_pass_rate
        .is_some_and(|r| !(0.0..=1.0).contains(&r))
    {
        return Err(usage("--min-pass-rate is a fraction from 0 to 1"));
    }
    if args.limit == Some(0) {
        return Err(usage("--limit must be at least 1"));
    }
    let suite = read_suite(&args.suite).map_err(usage)?;
    let tasks: Vec<Arc<EvalTask>> = select(suite, &args.only, args.limit)
        .map_err(usage)?
        .into_iter()
        .map(Arc::new)
        .collect();
    if let Some(root) = &args.scratch {
        let runs: Vec<(&str, u32)> = (tasks.iter())
            .flat_map(|t| (1..=args.repeat).map(move |n| (t.id.as_str(), n)))
            .collect();
        let taken = scratch_in_use(root, &runs);
        if !taken.is_empty() {
            let list: Vec<String> = taken.iter().map(|p| p.display().to_string()).collect();
            return Err(usage(format!(
                "--scratch: {} already there (left by an eval that was killed, or another \
                 eval's): remove them, or pick another folder",
                list.join(", ")
            )));
        }
    }
    let mut opts = args.opts.clone().absolutize();
    // Without `--workspace`, not the `.` absolutize pins: a fresh folder per task (run_checked).
    opts.workspace = opts.workspace.filter(|_| args.opts.workspace.is_some());
    let (report, min_rate) = if args.compare_grammar {
        let mut without = opts.clone();
        without.grammar = Some("off".into());
        let mut with = opts.clone();
        with.grammar = Some(opts.grammar.clone().unwrap_or_else(|| "auto".into()));
        let a = run_suite(&args, &tasks, &without).await?;
        let b = run_suite(&args, &tasks, &with).await?;
        if !args.json {
            let mut out = stdout();
            writeln!(out, "without a grammar:")?;
            print_table(&mut out, &a)?;
            writeln!(out, "\nwith a grammar ({}):", b.grammar)?;
            print_table(&mut out, &b)?;
        }
        let cmp = Comparison::of(&a, &b);
        if !args.json {
            print_comparison(&mut stdout(), &a, &b, &cmp)?;
        }
        let rate = b.pass_rate;
        (
            serde_json::json!({"without_grammar": a, "with_grammar": b, "comparison": cmp}),
            rate,
        )
    } else {
        let r = run_suite(&args, &tasks, &opts).await?;
        if !args.json {
            print_table(&mut stdout(), &r)?;
        }
        let rate = r.pass_rate;
        (serde_json::to_value(&r)?, rate)
    };
    if args.json {
        writeln!(stdout(), "{}", serde_json::to_string(&report)?)?;
    }
    match args.min_pass_rate {
        Some(min) if min_rate < min => Ok(ExitCode::from(3)),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// Every run of the suite with one set of options.
async fn run_suite(args: &EvalArgs, tasks: &[Arc<EvalTask>], opts: &RunOpts) -> Result<Report> {
    let setup = Arc::new(Setup::build(opts, true).await?);
    // A model picked from the server is named from here on: the tasks with a workspace build
    // their own setup, and must not each ask the server (and say so) again.
    let named;
    let opts = match &setup.picked_model {
        Some(model) => {
            named = RunOpts {
                model: Some(model.clone()),
                ..opts.clone()
            };
            &named
        }
        None => opts,
    };
    let session_dir = args.sessions.dir();
    let runs: Vec<(Arc<EvalTask>, u32)> = tasks
        .iter()
        .flat_map(|t| (1..=args.repeat).map(move |n| (t.clone(), n)))
        .collect();
    let bar = ProgressBar::new(runs.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} runs · {msg} · eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let passed_so_far = Arc::new(AtomicU32::new(0));
    let started = Instant::now();
    let mut results: Vec<RunReport> = futures::stream::iter(runs.into_iter().map(|(task, n)| {
        let (setup, opts, dir) = (setup.clone(), opts.clone(), session_dir.clone());
        let (bar, passed, scratch) = (bar.clone(), passed_so_far.clone(), args.scratch.clone());
        async move {
            let at = Places {
                sessions: dir.as_deref(),
                scratch: scratch.as_deref(),
            };
            let report = run_one(&setup, &opts, &task, n, at).await;
            if report.passed {
                passed.fetch_add(1, Ordering::Relaxed);
            }
            bar.inc(1);
            bar.set_message(format!("{} passed", passed.load(Ordering::Relaxed)));
            report
        }
    }))
    .buffer_unordered(args.concurrency)
    .collect()
    .await;
    bar.finish_and_clear();
    setup.shutdown().await;
    results.sort_by(|a, b| (a.id.as_str(), a.run).cmp(&(b.id.as_str(), b.run)));
    Ok(summarise(
        &args.suite,
        opts,
        results,
        started.elapsed().as_secs_f64(),
    ))
}

/// Where a run keeps its transcript (`--session-dir`) and makes its workspace (`--scratch`).
#[derive(Clone, Copy)]
struct Places<'a> {
    sessions: Option<&'a Path>,
    scratch: Option<&'a Path>,
}

/// Run one task once in its own copy of its workspace, and check the result.
async fn run_one(
    setup: &Setup,
    opts: &RunOpts,
    task: &EvalTask,
    run: u32,
    at: Places<'_>,
) -> RunReport {
    let started = Instant::now();
    let mut report = RunReport {
        id: task.id.clone(),
        run,
        status: Status::Error,
        passed: false,
        reason: None,
        steps: 0,
        turns: 0,
        constrained_turns: 0,
        format_corrections: 0,
        context_fits: 0,
        tokens: 0,
        completion_tokens: 0,
        seconds: 0.0,
        session: None,
    };
    if let Err(e) = run_checked(setup, opts, task, at, &mut report).await {
        report.status = Status::Error;
        report.passed = false;
        report.reason = Some(format!("{e:#}"));
    }
    report.seconds = started.elapsed().as_secs_f64();
    report
}

async fn run_checked(
    setup: &Setup,
    opts: &RunOpts,
    task: &EvalTask,
    at: Places<'_>,
    report: &mut RunReport,
) -> Result<()> {
    // A task with a workspace gets a fresh copy, and tools bound to it; one without, a fresh
    // empty folder unless `--workspace` named one (never wherever eval was started).
    let copy = match (&task.workspace, &opts.workspace) {
        (Some(src), _) => {
            let dir = fresh_workspace(at.scratch, &task.id, report.run)?;
            copy_workspace(src, dir.path())
                .with_context(|| format!("cannot copy the workspace {}", src.display()))?;
            Some(dir)
        }
        (None, None) => Some(fresh_workspace(at.scratch, &task.id, report.run)?),
        (None, Some(_)) => None,
    };
    let mut own_setup;
    let (setup, workspace) = match &copy {
        Some(dir) => {
            let mut o = opts.clone();
            o.workspace = Some(dir.path().to_path_buf());
            own_setup = Setup::build(&o, true).await?;
            // Tools bound to the copy, but the suite's one client: what it learned of the
            // server (its kind, its context window) is asked once per eval, not once per task.
            own_setup.model = setup.model.clone();
            (&own_setup, dir.path().to_path_buf())
        }
        None => (
            setup,
            opts.workspace.clone().unwrap_or_else(|| PathBuf::from(".")),
        ),
    };
    let agent = setup.agent_for(setup.model(0)?, task.role.clone())?;
    let turns = Arc::new(AtomicU32::new(0));
    let format = Arc::new(AtomicU32::new(0));
    let constrained = Arc::new(AtomicU32::new(0));
    let fits = Arc::new(AtomicU32::new(0));
    let (t, f, c, fit) = (
        turns.clone(),
        format.clone(),
        constrained.clone(),
        fits.clone(),
    );
    // A turn continued under a grammar (a thought cut) is several constrained requests, one turn.
    let counted = std::sync::atomic::AtomicBool::new(false);
    let sink: EventSink = Arc::new(move |e: &Event| match e {
        Event::TurnStarted { .. } => {
            t.fetch_add(1, Ordering::Relaxed);
            counted.store(false, Ordering::Relaxed);
        }
        Event::TurnFinished { constraint, .. }
            if constraint.is_constrained() && !counted.swap(true, Ordering::Relaxed) =>
        {
            c.fetch_add(1, Ordering::Relaxed);
        }
        Event::Correction { kind, .. } if FORMAT_CORRECTIONS.contains(&kind.as_str()) => {
            f.fetch_add(1, Ordering::Relaxed);
        }
        Event::ContextFitted { .. } => {
            fit.fetch_add(1, Ordering::Relaxed);
        }
        _ => {}
    });
    let transcript = match at.sessions {
        Some(d) => {
            Some(Transcript::create(d, &session::new_id())?.redacting(setup.redactor.clone()))
        }
        None => None,
    };
    let options = RunOptions {
        context: task
            .context
            .clone()
            .unwrap_or_else(|| setup.context.clone()),
        events: Some(sink),
        transcript,
        meta: setup.record(opts),
        ..RunOptions::default()
    };
    let outcome = agent.run_with(&task.task, options).await;
    if copy.is_some() {
        setup.shutdown().await;
    }
    report.status = outcome.status;
    report.steps = outcome.progress.steps;
    report.turns = turns.load(Ordering::Relaxed);
    report.format_corrections = format.load(Ordering::Relaxed);
    report.constrained_turns = constrained.load(Ordering::Relaxed);
    report.context_fits = fits.load(Ordering::Relaxed);
    let usage = &outcome.progress.usage;
    report.tokens = usage.prompt_tokens + usage.completion_tokens;
    report.completion_tokens = usage.completion_tokens;
    report.session = outcome.session.clone();
    if outcome.status != Status::Ok {
        report.reason = Some(match &outcome.error {
            Some(e) => format!("{}: {e}", outcome.status.as_str()),
            None => format!("the run ended {}", outcome.status.as_str()),
        });
        return Ok(());
    }
    let failed = task
        .checks
        .iter()
        .find_map(|c| c.verify(outcome.final_answer.as_ref(), &workspace).err());
    report.passed = failed.is_none();
    report.reason = failed;
    Ok(())
}

fn summarise(suite: &Path, opts: &RunOpts, results: Vec<RunReport>, seconds: f64) -> Report {
    let turns: u64 = results.iter().map(|r| u64::from(r.turns)).sum();
    let unreadable: u64 = results
        .iter()
        .map(|r| u64::from(r.format_corrections))
        .sum();
    let passed = results.iter().filter(|r| r.passed).count();
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let completion_tokens: u64 = results.iter().map(|r| r.completion_tokens).sum();
    Report {
        suite: suite.display().to_string(),
        model: opts.model.clone().unwrap_or_default(),
        grammar: opts.grammar.clone().unwrap_or_else(|| "auto".into()),
        tasks: results.len(),
        passed,
        pass_rate: ratio(passed as f64, results.len() as f64),
        readable_turn_rate: ratio(turns.saturating_sub(unreadable) as f64, turns as f64),
        constrained_turn_rate: ratio(
            results.iter().map(|r| f64::from(r.constrained_turns)).sum(),
            turns as f64,
        ),
        turns,
        steps: results.iter().map(|r| u64::from(r.steps)).sum(),
        tokens: results.iter().map(|r| r.tokens).sum(),
        completion_tokens,
        completion_tokens_per_turn: ratio(completion_tokens as f64, turns as f64),
        seconds,
        seconds_per_turn: ratio(results.iter().map(|r| r.seconds).sum(), turns as f64),
        results,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(passed: bool, turns: u32, corrections: u32, completion: u64, seconds: f64) -> RunReport {
        RunReport {
            id: "t".into(),
            run: 1,
            status: Status::Ok,
            passed,
            reason: None,
            steps: turns,
            turns,
            constrained_turns: 0,
            format_corrections: corrections,
            context_fits: 0,
            tokens: completion + 100,
            completion_tokens: completion,
            seconds,
            session: None,
        }
    }

    /// The figures a grammar moves are in the report per turn, and side by side in the comparison.
    #[test]
    fn the_comparison_puts_free_and_constrained_per_turn_figures_side_by_side() {
        let opts = RunOpts::default();
        let suite = Path::new("suite.jsonl");
        let free = summarise(
            suite,
            &opts,
            vec![run(false, 4, 2, 400, 8.0), run(true, 1, 0, 100, 2.0)],
            10.0,
        );
        let constrained = summarise(
            suite,
            &opts,
            vec![run(true, 2, 0, 300, 6.0), run(true, 2, 0, 300, 6.0)],
            12.0,
        );
        assert_eq!(free.completion_tokens, 500);
        assert!((free.completion_tokens_per_turn - 100.0).abs() < 1e-9);
        assert!((constrained.completion_tokens_per_turn - 150.0).abs() < 1e-9);
        let cmp = Comparison::of(&free, &constrained);
        assert!((cmp.completion_tokens_per_turn - 1.5).abs() < 1e-9);
        assert!((cmp.seconds_per_turn - 1.5).abs() < 1e-9);
        assert_eq!(cmp.readable_turn_rate, [0.6, 1.0]);
        assert_eq!(cmp.pass_rate, [0.5, 1.0]);
        let mut out = Vec::new();
        print_comparison(&mut out, &free, &constrained, &cmp).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("completion tokens per turn"), "{text}");
        assert!(text.contains("100.00     150.00   1.50x"), "{text}");
        assert!(text.contains("readable turns (%)"), "{text}");
        let json = serde_json::to_value(&cmp).unwrap();
        assert_eq!(json["pass_rate"], serde_json::json!([0.5, 1.0]));
    }
}
