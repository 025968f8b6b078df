//! The live view on stderr: the thought as it streams, the action highlighted, a short form of
//! each observation, corrections, the final answer and a one-line summary. Colours only on a
//! terminal, and never with `NO_COLOR` (anstream decides).

use std::io::Write;
use std::sync::Mutex;

use anstyle::{AnsiColor, Style};
use serde_json::Value;

use tagloop::agent::Event;

const DIM: Style = Style::new().dimmed();
const ACTION: Style = AnsiColor::Cyan.on_default().bold();
const WARN: Style = AnsiColor::Yellow.on_default();
const GOOD: Style = AnsiColor::Green.on_default().bold();
const BAD: Style = AnsiColor::Red.on_default().bold();
const HEAD: Style = Style::new().bold();

/// Lines of an observation shown in the short form.
const OBSERVATION_LINES: usize = 4;

/// Renders events on stderr.
pub struct Live {
    out: Mutex<anstream::Stderr>,
    /// Prefix for every line (the task id in a batch), empty for a single run.
    quiet: bool,
    streamed: Mutex<bool>,
}

impl Live {
    /// A live view; `quiet` shows only the summary.
    pub fn new(quiet: bool) -> Self {
        Live {
            out: Mutex::new(anstream::stderr()),
            quiet,
            streamed: Mutex::new(false),
        }
    }

    /// Render one event.
    pub fn show(&self, event: &Event) {
        let Ok(mut out) = self.out.lock() else { return };
        let _ = render(&mut *out, event, self.quiet, &self.streamed);
    }
}

fn render(
    out: &mut dyn Write,
    event: &Event,
    quiet: bool,
    streamed: &Mutex<bool>,
) -> std::io::Result<()> {
    if quiet {
        if let Event::Finished { outcome } = event {
            writeln!(out, "{}", summary(outcome))?;
        }
        return Ok(());
    }
    match event {
        Event::RunStarted {
            task,
            model,
            session,
            ..
        } => {
            writeln!(out, "{HEAD}task{HEAD:#} {}", first_line(task, 200))?;
            writeln!(out, "{DIM}model {model} · session {session}{DIM:#}")?;
        }
        Event::TurnStarted { step, final_only } => {
            let extra = if *final_only {
                " (last chance: final answer only)"
            } else {
                ""
            };
            writeln!(out, "{HEAD}── step {step}{extra}{HEAD:#}")?;
        }
        Event::TextDelta { text } => {
            write!(out, "{DIM}{text}{DIM:#}")?;
            out.flush()?;
            if let Ok(mut s) = streamed.lock() {
                *s = true;
            }
        }
        Event::TurnFinished { text, .. } => {
            let mut s = streamed.lock().map(|g| *g).unwrap_or(false);
            if !s {
                // Nothing streamed (a replay): show the turn itself.
                write!(out, "{DIM}{text}{DIM:#}")?;
                s = true;
            }
            if s {
                writeln!(out)?;
            }
            if let Ok(mut g) = streamed.lock() {
                *g = false;
            }
        }
        Event::Action { tool, args } => {
            writeln!(out, "{ACTION}▶ {tool}({}){ACTION:#}", short_args(args))?;
        }
        Event::ToolFinished {
            tool,
            ok,
            elapsed_ms,
        } => {
            let (style, mark) = if *ok { (GOOD, "✓") } else { (BAD, "✗") };
            writeln!(
                out,
                "{style}{mark}{style:#} {tool} {DIM}({elapsed_ms} ms){DIM:#}"
            )?;
        }
        Event::Observation { text } => {
            let body = text
                .trim()
                .trim_start_matches("<observation>")
                .trim_end_matches("</observation>")
                .trim();
            let lines: Vec<&str> = body.lines().collect();
            for l in lines.iter().take(OBSERVATION_LINES) {
                writeln!(out, "{DIM}  │ {}{DIM:#}", first_line(l, 160))?;
            }
            if lines.len() > OBSERVATION_LINES {
                writeln!(
                    out,
                    "{DIM}  │ … {} more lines{DIM:#}",
                    lines.len() - OBSERVATION_LINES
                )?;
            }
        }
        Event::Correction { kind, message } => {
            writeln!(out, "{WARN}⚠ {kind}: {}{WARN:#}", first_line(message, 200))?;
        }
        Event::Final { value, .. } => {
            let text = match value {
                Value::String(s) => s.clone(),
                v => serde_json::to_string_pretty(v).unwrap_or_default(),
            };
            writeln!(out, "{GOOD}final answer{GOOD:#}\n{text}")?;
        }
        Event::Finished { outcome } => writeln!(out, "{}", summary(outcome))?,
        _ => {}
    }
    Ok(())
}

/// `ok · 3 steps · 4 model calls · 1200+80 tokens · session ID`
pub fn summary(outcome: &Value) -> String {
    let status = outcome.get("status").and_then(Value::as_str).unwrap_or("?");
    let n = |k: &str| outcome.get(k).and_then(Value::as_u64).unwrap_or(0);
    let u = |k: &str| {
        outcome
            .get("usage")
            .and_then(|u| u.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let style = if status == "ok" { GOOD } else { BAD };
    let mut s = format!(
        "{style}{status}{style:#} · {} steps · {} model calls · {}+{} tokens",
        n("steps"),
        n("llm_calls"),
        u("prompt_tokens"),
        u("completion_tokens")
    );
    if let Some(id) = outcome.get("session").and_then(Value::as_str) {
        s.push_str(&format!(" · session {id}"));
    }
    if let Some(e) = outcome.get("error").and_then(Value::as_str) {
        s.push_str(&format!("\n{style}{}{style:#}", first_line(e, 300)));
    }
    s
}

fn short_args(args: &Value) -> String {
    let Some(obj) = args.as_object() else {
        return String::new();
    };
    obj.iter()
        .map(|(k, v)| format!("{k}={}", first_line(&v.to_string(), 60)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn first_line(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    let mut out: String = line.chars().take(max).collect();
    if out.len() < line.len() || s.lines().nth(1).is_some() {
        out.push('…');
    }
    out
}
