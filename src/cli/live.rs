//! The live view on stderr: the thought as it streams, the action highlighted, a short form of
//! each observation, corrections, the final answer and a one-line summary. Colours only on a
//! terminal, and never with `NO_COLOR` (anstream decides).
//!
//! Every piece of text that comes from outside tagloop (the model, a tool, a server, a session
//! file) passes through [`terminal_safe`] (`terminal_safe.rs`) before it is written, here and in every other text view
//! of the CLI (`replay`, `sessions`, the answer on stdout, error messages), so a model or a tool
//! cannot retitle the terminal, write the clipboard (OSC 52), clear the screen or reorder what the
//! user reads. Machine output (`--json`, `--events`) is exact JSON, where serde escapes controls.

use std::io::Write;
use std::sync::Mutex;

use anstyle::{AnsiColor, Style};
use serde_json::Value;

use tagloop::agent::Event;
use tagloop::llm::Constraint;
/// Outside text made printable: multi-line ([`terminal_safe`]) or one-line ([`one_line`]).
pub use tagloop::shown::{one_line, terminal_safe};

use super::log_writer::mid_line;

const DIM: Style = Style::new().dimmed();
const ACTION: Style = AnsiColor::Cyan.on_default().bold();
const WARN: Style = AnsiColor::Yellow.on_default();
const NOTE: Style = AnsiColor::Magenta.on_default();
const GOOD: Style = AnsiColor::Green.on_default().bold();
const BAD: Style = AnsiColor::Red.on_default().bold();
const HEAD: Style = Style::new().bold();

/// Lines of an observation shown in the short form.
const OBSERVATION_LINES: usize = 4;

/// Renders events on stderr.
pub struct Live {
    view: Mutex<View>,
    /// Only the summary.
    quiet: bool,
}

/// What the live view remembers between events, so each thing is said once.
struct View {
    out: anstream::Stderr,
    /// Text of the current turn was streamed (so `TurnFinished` need not show it again).
    streamed: bool,
    /// The grammar note last shown: it is said once, and again only when the constraint changes.
    noted: Option<Constraint>,
    /// The last correction's message: the observation that carries it is not shown twice.
    correction: Option<String>,
}

impl Live {
    /// A live view; `quiet` shows only the summary.
    pub fn new(quiet: bool) -> Self {
        Live {
            view: Mutex::new(View {
                out: anstream::stderr(),
                streamed: false,
                noted: None,
                correction: None,
            }),
            quiet,
        }
    }

    /// Render one event.
    pub fn show(&self, event: &Event) {
        let Ok(mut view) = self.view.lock() else {
            return;
        };
        let mut mid = mid_line();
        let View {
            out,
            streamed,
            noted,
            correction,
        } = &mut *view;
        let mut state = State {
            streamed,
            noted,
            correction,
            mid_line: &mut mid,
        };
        let _ = render(out, event, self.quiet, &mut state);
    }
}

/// Write a saved run as the live view showed it (`tagloop replay`: the command's output).
pub fn replay(out: &mut dyn Write, events: &[Event]) -> std::io::Result<()> {
    let (mut streamed, mut noted, mut correction, mut mid_line) = (false, None, None, false);
    for e in events {
        let mut state = State {
            streamed: &mut streamed,
            noted: &mut noted,
            correction: &mut correction,
            mid_line: &mut mid_line,
        };
        render(out, e, false, &mut state)?;
    }
    Ok(())
}

/// The state [`render`] reads and updates (borrowed from a [`View`] and [`MID_LINE`]).
struct State<'a> {
    streamed: &'a mut bool,
    noted: &'a mut Option<Constraint>,
    correction: &'a mut Option<String>,
    mid_line: &'a mut bool,
}

impl State<'_> {
    /// End a line left open by streamed text, so what follows starts on a line of its own.
    fn break_line(&mut self, out: &mut dyn Write) -> std::io::Result<()> {
        if std::mem::take(self.mid_line) {
            writeln!(out)?;
        }
        Ok(())
    }
}

/// Write one event as the live view shows it (`quiet`: only the summary), reading and updating
/// what the view remembers between events (`state`: the live view's own, or [`replay`]'s).
fn render(
    out: &mut dyn Write,
    event: &Event,
    quiet: bool,
    state: &mut State<'_>,
) -> std::io::Result<()> {
    if quiet {
        if let Event::Finished { outcome } = event {
            writeln!(out, "{}", summary(outcome))?;
        }
        return Ok(());
    }
    if !matches!(event, Event::TextDelta { .. }) {
        state.break_line(out)?;
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
                one_line(model),
                one_line(session)
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
            if text.is_empty() {
                return Ok(());
            }
            write!(out, "{DIM}{}{DIM:#}", terminal_safe(text))?;
            out.flush()?;
            *state.streamed = true;
            *state.mid_line = !text.ends_with('\n');
        }
        Event::TurnFinished {
            text, constraint, ..
        } => {
            if !std::mem::take(state.streamed) {
                // Nothing streamed (a replay): show the turn itself.
                writeln!(out, "{DIM}{}{DIM:#}", terminal_safe(text))?;
            }
            grammar_note(out, *constraint, state.noted)?;
        }
        Event::Action { tool, args } => {
            writeln!(
                out,
                "{ACTION}▶ {}({}){ACTION:#}",
                one_line(tool),
                short_args(args)
            )?;
        }
        Event::ToolFinished {
            tool,
            ok,
            elapsed_ms,
            ..
        } => {
            let (style, mark) = if *ok { (GOOD, "✓") } else { (BAD, "✗") };
            writeln!(
                out,
                "{style}{mark}{style:#} {} {DIM}({elapsed_ms} ms){DIM:#}",
                one_line(tool)
            )?;
        }
        Event::Observation { text } => {
            let body = text
                .trim()
                .trim_start_matches("<observation>")
                .trim_end_matches("</observation>")
                .trim();
            // A correction is sent to the model as the observation: its line above said it.
            if let Some(said) = state.correction.take()
                && body.starts_with(said.trim())
            {
                return Ok(());
            }
            let lines: Vec<&str> = body.lines().collect();
            for l in lines.iter().take(OBSERVATION_LINES) {
                writeln!(out, "{DIM}  │ {}{DIM:#}", first_line(l, 160))?;
            }
            if lines.len() > OBSERVATION_LINES {
                let more = count((lines.len() - OBSERVATION_LINES) as u64, "more line");
                writeln!(out, "{DIM}  │ … {more}{DIM:#}")?;
            }
        }
        Event::Correction { kind, message } => {
            writeln!(
                out,
                "{WARN}⚠ {}: {}{WARN:#}",
                one_line(kind),
                first_line(message, 200)
            )?;
            *state.correction = Some(message.clone());
        }
        Event::Notice { kind, message } => {
            writeln!(
                out,
                "{NOTE}◆ {}: {}{NOTE:#}",
                one_line(kind),
                first_line(message, 300)
            )?;
        }
        Event::Final { warnings, .. } => {
            // The answer was just shown as the model wrote it (streamed, or the turn's text in
            // a replay), and `run` prints it on stdout: here only that it was accepted.
            let how = if warnings.is_empty() {
                String::new()
            } else {
                format!(
                    " {DIM}(read leniently: {}){DIM:#}",
                    first_line(&warnings.join("; "), 200)
                )
            };
            writeln!(out, "{GOOD}✓ final answer accepted{GOOD:#}{how}")?;
        }
        Event::Finished { outcome } => writeln!(out, "{}", summary(outcome))?,
        Event::ContextFitted { .. } => {
            if let Some(line) = describe_fit(event) {
                writeln!(out, "{NOTE}◆ context: {line}{NOTE:#}")?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// What a `context_fitted` event says, in one line for a person (`None` for other events): the
/// tokens before and after, what was left out, the turn's budget. The text views (`live`,
/// `replay`, `replay --html`) all say it in these words.
pub fn describe_fit(event: &Event) -> Option<String> {
    let Event::ContextFitted {
        step,
        window,
        tokens_before,
        tokens_after,
        counted,
        observations_cut,
        steps_summarised,
        max_tokens,
        final_only,
        after_refusal,
        ..
    } = event
    else {
        return None;
    };
    let how = if *counted { "counted" } else { "estimated" };
    let mut line = format!(
        "step {step} fitted into a window of {window} tokens: {tokens_before} → {tokens_after} ({how})"
    );
    let mut cut = Vec::new();
    if *observations_cut > 0 {
        cut.push(format!(
            "{} shortened",
            count(u64::from(*observations_cut), "observation")
        ));
    }
    if *steps_summarised > 0 {
        cut.push(format!(
            "{} summarised",
            count(u64::from(*steps_summarised), "step")
        ));
    }
    if !cut.is_empty() {
        line.push_str(&format!("; {}", cut.join(", ")));
    }
    if let Some(n) = max_tokens {
        line.push_str(&format!("; turn budget {n}"));
    }
    if *final_only {
        line.push_str("; final answer only");
    }
    if *after_refusal {
        line.push_str("; after the server refused the prompt as too long");
    }
    Some(line)
}

/// Say once how turns are sampled: the first time a grammar constrains one, and again only when
/// that changes (a server that refused the grammar says so in a notice of its own).
fn grammar_note(
    out: &mut dyn Write,
    constraint: Constraint,
    noted: &mut Option<Constraint>,
) -> std::io::Result<()> {
    if constraint == Constraint::None || *noted == Some(constraint) {
        return Ok(());
    }
    *noted = Some(constraint);
    let note = match constraint {
        Constraint::LazyGrammar => {
            "turns: free reasoning, then the turn grammar from <action> or <final_answer> on"
        }
        _ => "turns: sampled under the turn grammar (tagloop prompt --show-grammar)",
    };
    writeln!(out, "{DIM}{note}{DIM:#}")
}

/// `n` and its noun, the noun in the plural unless `n` is one: `count(1, "step")` is `1 step`,
/// `count(3, "model call")` is `3 model calls`. Every count shown to a person goes through it
/// (the nouns used take a plain `s`).
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// `ok · 3 steps · 4 model calls · 1200+80 tokens · session ID` (`1 step`, `1 model call`).
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
        "{style}{}{style:#} · {} · {} · {}+{} tokens",
        one_line(status),
        count(n("steps"), "step"),
        count(n("llm_calls"), "model call"),
        u("prompt_tokens"),
        u("completion_tokens")
    );
    if let Some(id) = outcome.get("session").and_then(Value::as_str) {
        s.push_str(&format!(" · session {}", one_line(id)));
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
    fn a_cut_keeps_the_line_safe() {
        assert_eq!(first_line("x\x1b[2Jy\nmore", 10), r"x\u{1b}[2Jy…");
    }

    /// The live view's text for `events`, styles removed.
    fn shown(events: &[Event]) -> String {
        let mut out = Vec::new();
        replay(&mut out, events).unwrap();
        let text = String::from_utf8(out).unwrap();
        anstream::adapter::strip_str(&text).to_string()
    }

    fn turn(step: u32, text: &str, constraint: Constraint) -> Vec<Event> {
        vec![
            Event::TurnStarted {
                step,
                final_only: false,
            },
            Event::TextDelta { text: text.into() },
            Event::TurnFinished {
                text: text.into(),
                finish: tagloop::llm::Finish::End,
                usage: Default::default(),
                elapsed_ms: 1,
                constraint,
            },
        ]
    }

    #[test]
    fn the_grammar_note_is_said_once_and_again_only_when_it_changes() {
        let mut events = turn(1, "<thought>a</thought>", Constraint::Grammar);
        events.extend(turn(2, "<thought>b</thought>", Constraint::Grammar));
        events.extend(turn(3, "<thought>c</thought>", Constraint::LazyGrammar));
        let text = shown(&events);
        assert_eq!(
            text.matches("sampled under the turn grammar").count(),
            1,
            "{text}"
        );
        assert_eq!(text.matches("free reasoning, then").count(), 1, "{text}");
    }

    #[test]
    fn a_notice_inside_a_streaming_turn_starts_on_a_line_of_its_own() {
        let text = shown(&[
            Event::TextDelta {
                text: "<thought>half a thou".into(),
            },
            Event::Notice {
                kind: "retry".into(),
                message: "model request 1 failed\x1b[2J; retrying".into(),
            },
        ]);
        assert_eq!(
            text,
            "<thought>half a thou\n◆ retry: model request 1 failed\\u{1b}[2J; retrying\n"
        );
    }

    #[test]
    fn a_correction_is_shown_once_not_again_as_its_observation() {
        let message =
            "This is the third time in a row you make exactly this call.\nIts result was:\nx";
        let text = shown(&[
            Event::Correction {
                kind: "loop".into(),
                message: message.into(),
            },
            Event::Observation {
                text: format!("<observation>{message}\n\n[2 steps left]</observation>"),
            },
            Event::Observation {
                text: "<observation>a tool's output</observation>".into(),
            },
        ]);
        assert_eq!(text.matches("third time in a row").count(), 1, "{text}");
        assert!(text.contains("│ a tool's output"), "{text}");
    }

    #[test]
    fn the_final_answer_is_not_repeated_and_counts_are_singular_for_one() {
        let mut events = turn(1, "<final_answer>forty-two", Constraint::None);
        events.push(Event::Final {
            value: Value::String("forty-two".into()),
            warnings: vec![],
        });
        events.push(Event::Finished {
            outcome: serde_json::json!({"status": "ok", "steps": 1, "llm_calls": 1,
                "usage": {"prompt_tokens": 10, "completion_tokens": 2}}),
        });
        let text = shown(&events);
        assert_eq!(text.matches("forty-two").count(), 1, "{text}");
        assert!(
            text.contains("ok · 1 step · 1 model call · 10+2 tokens"),
            "{text}"
        );
        let long = (1..=5)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let text = shown(&[Event::Observation { text: long }]);
        assert!(text.contains("… 1 more line\n"), "{text}");
        assert_eq!(count(0, "step"), "0 steps");
        assert_eq!(count(2, "model call"), "2 model calls");
    }
}
