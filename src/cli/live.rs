//! The live view on stderr: the thought as it streams, the action highlighted, a short form of
//! each observation, corrections, the final answer and a one-line summary. Colours only on a
//! terminal, and never with `NO_COLOR` (anstream decides).
//!
//! Every piece of text that comes from outside tagloop (the model, a tool, a server, a session
//! file) passes through [`terminal_safe`] before it is written, here and in every other text view
//! of the CLI (`replay`, `sessions`, the answer on stdout, error messages), so a model or a tool
//! cannot retitle the terminal, write the clipboard (OSC 52), clear the screen or reorder what the
//! user reads. Machine output (`--json`, `--events`) is exact JSON, where serde escapes controls.

use std::borrow::Cow;
use std::io::Write;
use std::sync::Mutex;

use anstyle::{AnsiColor, Style};
use serde_json::Value;

use tagloop::agent::Event;
use tagloop::llm::Constraint;

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

/// Write one event as the live view shows it (`quiet`: only the summary). `streamed` says
/// whether the current turn's text was streamed already; `replay` passes its own, to write a
/// saved run on stdout.
pub fn render(
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
            writeln!(
                out,
                "{DIM}model {} · session {}{DIM:#}",
                terminal_safe(model),
                terminal_safe(session)
            )?;
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
            write!(out, "{DIM}{}{DIM:#}", terminal_safe(text))?;
            out.flush()?;
            if let Ok(mut s) = streamed.lock() {
                *s = true;
            }
        }
        Event::TurnFinished {
            text, constraint, ..
        } => {
            let mut s = streamed.lock().map(|g| *g).unwrap_or(false);
            if !s {
                // Nothing streamed (a replay): show the turn itself.
                write!(out, "{DIM}{}{DIM:#}", terminal_safe(text))?;
                s = true;
            }
            if s {
                writeln!(out)?;
            }
            match constraint {
                Constraint::Grammar => writeln!(
                    out,
                    "{DIM}(sampled under the turn grammar: tagloop prompt --show-grammar){DIM:#}"
                )?,
                Constraint::LazyGrammar => writeln!(
                    out,
                    "{DIM}(free reasoning, then the turn grammar from <action> or <final_answer> on){DIM:#}"
                )?,
                Constraint::None => {}
            }
            if let Ok(mut g) = streamed.lock() {
                *g = false;
            }
        }
        Event::Action { tool, args } => {
            writeln!(
                out,
                "{ACTION}▶ {}({}){ACTION:#}",
                terminal_safe(tool),
                short_args(args)
            )?;
        }
        Event::ToolFinished {
            tool,
            ok,
            elapsed_ms,
        } => {
            let (style, mark) = if *ok { (GOOD, "✓") } else { (BAD, "✗") };
            writeln!(
                out,
                "{style}{mark}{style:#} {} {DIM}({elapsed_ms} ms){DIM:#}",
                terminal_safe(tool)
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
            writeln!(out, "{GOOD}final answer{GOOD:#}\n{}", terminal_safe(&text))?;
        }
        Event::Finished { outcome } => writeln!(out, "{}", summary(outcome))?,
        _ => {}
    }
    Ok(())
}

/// Text from outside tagloop made safe to print on a terminal: control characters (C0 but `\n`
/// and `\t`, DEL, C1 U+0080–U+009F) and the bidirectional overrides and isolates (U+202A–U+202E,
/// U+2066–U+2069) are shown visibly as Rust escapes (`\u{1b}`, `\r`), so nothing a model or a
/// tool writes is interpreted by the terminal. A `\r` right before `\n` is kept (a CRLF line end
/// is harmless). Borrowed when there is nothing to change, which is the common case.
pub fn terminal_safe(s: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n' && c != '\t' && c != '\r')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    let lone_cr = |i: usize| s.as_bytes().get(i + 1) != Some(&b'\n');
    if !s
        .char_indices()
        .any(|(i, c)| unsafe_char(c) || (c == '\r' && lone_cr(i)))
    {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for (i, c) in s.char_indices() {
        if unsafe_char(c) || (c == '\r' && lone_cr(i)) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
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
        "{style}{}{style:#} · {} steps · {} model calls · {}+{} tokens",
        terminal_safe(status),
        n("steps"),
        n("llm_calls"),
        u("prompt_tokens"),
        u("completion_tokens")
    );
    if let Some(id) = outcome.get("session").and_then(Value::as_str) {
        s.push_str(&format!(" · session {}", terminal_safe(id)));
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

/// The first line of `s`, at most `max` characters, made [`terminal_safe`]; `…` marks a cut.
fn first_line(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    let mut out: String = line.chars().take(max).collect();
    if out.len() < line.len() || s.lines().nth(1).is_some() {
        out.push('…');
    }
    terminal_safe(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_safe_shows_controls_and_overrides_and_keeps_layout() {
        assert!(matches!(
            terminal_safe("plain\ttext\r\nnext"),
            Cow::Borrowed("plain\ttext\r\nnext")
        ));
        assert_eq!(
            terminal_safe("a\x1b]0;t\x07b\rc\u{9b}d\u{202e}e\u{2066}f\x7f"),
            r"a\u{1b}]0;t\u{7}b\rc\u{9b}d\u{202e}e\u{2066}f\u{7f}"
        );
        // A cut keeps the result safe too.
        assert_eq!(first_line("x\x1b[2Jy\nmore", 10), r"x\u{1b}[2Jy…");
    }
}
