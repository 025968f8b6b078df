//! `tagloop sessions` and `tagloop replay`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::Value;

use tagloop::agent::Event;
use tagloop::session;

use super::live::{self, terminal_safe};
use super::options::usage;
use super::output::stdout;

/// `tagloop sessions`.
#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// Where transcripts are [default: the user's data dir] [env: TAGLOOP_SESSION_DIR]
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,
    /// Print a JSON array
    #[arg(long)]
    pub json: bool,
}

/// `tagloop replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The session: its id, the start of its id, `last` (the newest), or its transcript file
    pub session: String,
    /// Where transcripts are [default: the user's data dir] [env: TAGLOOP_SESSION_DIR]
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,
    /// Write the run as one self-contained HTML page
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

fn dir(d: &Option<PathBuf>) -> PathBuf {
    super::options::session_dir(d.as_deref())
}

pub fn sessions(args: SessionsArgs) -> Result<ExitCode> {
    let list = session::list(&dir(&args.session_dir))?;
    let mut out = stdout();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&list)?)?;
    } else if list.is_empty() {
        eprintln!("no sessions in {}", dir(&args.session_dir).display());
    } else {
        writeln!(
            out,
            "{:<28} {:<20} {:<14} {:>5}  task",
            "id", "started", "status", "steps"
        )?;
        for s in list {
            let task: String = s
                .task
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(60)
                .collect();
            writeln!(
                out,
                "{:<28} {:<20} {:<14} {:>5}  {}",
                terminal_safe(&s.id),
                terminal_safe(&s.started),
                terminal_safe(&s.status),
                s.steps,
                terminal_safe(&task)
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn replay(args: ReplayArgs) -> Result<ExitCode> {
    let path = session::resolve(&dir(&args.session_dir), &args.session).map_err(usage)?;
    let loaded = session::load(&path)?;
    for w in &loaded.warnings {
        eprintln!("warning: {}", terminal_safe(w));
    }
    let events: Vec<Event> = loaded
        .records
        .iter()
        .filter_map(|r| serde_json::from_value::<Event>(r.clone()).ok())
        .collect();
    if let Some(html) = &args.html {
        std::fs::write(html, render_html(&args.session, &events))
            .with_context(|| format!("cannot write {}", html.display()))?;
        eprintln!("wrote {}", html.display());
        return Ok(ExitCode::SUCCESS);
    }
    // The replay is the command's output: on stdout, as the live view showed the run.
    let mut out = stdout();
    let streamed = Mutex::new(false);
    for e in &events {
        live::render(&mut out, e, false, &streamed)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// HTML-escaped text, with control characters and bidi overrides first made visible by
/// [`terminal_safe`] (they are invalid in HTML text, and an override would reorder the page).
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in terminal_safe(s).chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = "body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}\
h1{font-size:1.3rem}pre{white-space:pre-wrap;word-break:break-word;margin:.3rem 0;font:13px/1.45 ui-monospace,monospace}\
.step{border-left:3px solid #ccd;padding:.2rem .8rem;margin:1rem 0}.thought pre{color:#555}\
.action pre{color:#05a;font-weight:600}.obs pre{background:#f5f5f7;padding:.4rem}\
.corr pre{color:#a60}.final{border-left-color:#2a2}.final pre{font-weight:600}\
.meta{color:#777;font-size:.85rem}.bad{color:#b00}";

/// One self-contained page: thoughts, actions, observations, corrections, the final answer, timings.
pub fn render_html(id: &str, events: &[Event]) -> String {
    let mut body = String::new();
    let mut open = false;
    for e in events {
        match e {
            Event::RunStarted {
                task,
                model,
                started,
                ..
            } => {
                let _ = write!(
                    body,
                    "<h1>{}</h1><p class=meta>model {} · started {}</p>",
                    esc(task),
                    esc(model),
                    esc(started)
                );
            }
            Event::TurnStarted { step, final_only } => {
                if open {
                    body.push_str("</section>");
                }
                open = true;
                let only = if *final_only {
                    " (final answer only)"
                } else {
                    ""
                };
                let _ = write!(
                    body,
                    "<section class=step><h2 class=meta>step {step}{only}</h2>"
                );
            }
            Event::Finished { outcome } => {
                if open {
                    body.push_str("</section>");
                    open = false;
                }
                let _ = write!(
                    body,
                    "<h2>outcome</h2><pre>{}</pre>",
                    esc(&serde_json::to_string_pretty(outcome).unwrap_or_default())
                );
            }
            other => body.push_str(&html_event(other)),
        }
    }
    if open {
        body.push_str(
            "</section><p class=bad>The run did not finish (killed or still running).</p>",
        );
    }
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>tagloop session {}</title><style>{STYLE}</style></head><body>{body}</body></html>\n",
        esc(id)
    )
}

/// One event inside a step, as HTML (empty for the events the page does not show).
fn html_event(e: &Event) -> String {
    match e {
        Event::TurnFinished {
            usage, elapsed_ms, ..
        } => {
            format!(
                "<p class=meta>model turn: {elapsed_ms} ms, {}+{} tokens</p>",
                usage.prompt_tokens, usage.completion_tokens
            )
        }
        Event::Thought { text } => {
            format!(
                "<div class=thought><b>thought</b><pre>{}</pre></div>",
                esc(text)
            )
        }
        Event::Action { tool, args } => {
            format!(
                "<div class=action><b>action</b><pre>{}({})</pre></div>",
                esc(tool),
                esc(&serde_json::to_string_pretty(args).unwrap_or_default())
            )
        }
        Event::ToolFinished {
            tool,
            ok,
            elapsed_ms,
        } => {
            format!(
                "<p class=meta>{} {} in {elapsed_ms} ms</p>",
                esc(tool),
                if *ok {
                    "ran"
                } else {
                    "<span class=bad>failed</span>"
                }
            )
        }
        Event::Observation { text } => {
            format!(
                "<div class=obs><b>observation</b><pre>{}</pre></div>",
                esc(text)
            )
        }
        Event::Correction { kind, message } => {
            format!(
                "<div class=corr><b>correction: {}</b><pre>{}</pre></div>",
                esc(kind),
                esc(message)
            )
        }
        Event::Final { value, .. } => {
            let text = match value {
                Value::String(s) => s.clone(),
                v => serde_json::to_string_pretty(v).unwrap_or_default(),
            };
            format!(
                "<div class='step final'><b>final answer</b><pre>{}</pre></div>",
                esc(&text)
            )
        }
        _ => String::new(),
    }
}
