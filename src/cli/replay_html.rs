//! `tagloop replay --html`: a saved run as one self-contained HTML page.
//!
//! The page opens with the outcome (status, final answer or error, steps, model calls, tokens,
//! time), then the task, then one section per step: the turn as the model wrote it beside what
//! tagloop read from it (the thought, the tool and its arguments, or the final answer), the tool's
//! run, the observation (folded in a closed `<details>` when long), corrections and notices.
//!
//! Everything in the page that comes from a transcript (the model, tools, servers, the task) is
//! untrusted: it goes through [`esc`], which makes controls visible ([`terminal_safe`]) and
//! escapes HTML, and only ever lands in element text. The page also carries a content security
//! policy that forbids every script and every load (styles are inline), so an escape missed one
//! day still could not run code or tell anyone the page was opened.
//!
//! The page is built in two passes: the events are folded into a [`Page`] (the outcome is the
//! last event, but the first thing shown), then written out.

use std::fmt::Write as _;

use serde_json::Value;

use tagloop::agent::Event;
use tagloop::llm::{Finish, Usage};

use super::live::{count, terminal_safe};

/// An observation longer than this many lines is folded.
const FOLD_LINES: usize = 12;
/// An observation longer than this many bytes is folded.
const FOLD_BYTES: usize = 1500;

/// No script, no load from anywhere (images, fonts, frames, styles from files); inline styles
/// only. A `<meta>` policy applies to everything after it, so it comes first in `<head>`.
const CSP: &str = "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">";

const STYLE: &str = "body{font:15px/1.5 system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;color:#222}\
h1{font-size:1.3rem;margin:.2rem 0}h2{font-size:1.05rem;margin:.2rem 0}h3{font-size:.8rem;text-transform:uppercase;letter-spacing:.05em;color:#777;margin:.2rem 0}\
pre{white-space:pre-wrap;word-break:break-word;margin:.3rem 0;font:13px/1.45 ui-monospace,monospace}\
.outcome{border:2px solid #2a2;border-radius:6px;padding:.6rem 1rem;margin-bottom:1.5rem}.outcome.bad{border-color:#b00}\
.status{font-weight:700;color:#2a2}.outcome.bad .status{color:#b00}\
.facts{display:flex;flex-wrap:wrap;gap:.3rem 1.5rem;margin:.4rem 0;padding:0;list-style:none;font-weight:600}\
.answer pre{font-weight:600;background:#f3faf3;padding:.4rem}.error{color:#b00}\
.step{border-left:3px solid #ccd;padding:.2rem .8rem;margin:1.2rem 0}\
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1rem}@media(max-width:50rem){.pair{grid-template-columns:1fr}}\
.written pre{background:#f7f7f9;padding:.4rem;color:#444}.call code{color:#05a;font-weight:700}\
.args{border-collapse:collapse}.args th{text-align:left;vertical-align:top;padding:.1rem .6rem .1rem 0;color:#555;font-weight:600}\
.obs pre{background:#f5f5f7;padding:.4rem}summary{cursor:pointer;color:#555}\
.corr{color:#a60}.notice{color:#858}.meta{color:#777;font-size:.85rem}.bad{color:#b00}";

/// One self-contained page: the outcome first, then the task and every step.
pub fn render_html(id: &str, events: &[Event]) -> String {
    let page = Page::from_events(events);
    let mut body = String::new();
    page.outcome(&mut body);
    page.task(&mut body);
    for (i, step) in page.steps.iter().enumerate() {
        step.render(&mut body, i + 1);
    }
    format!(
        "<!doctype html><html lang=en><head>{CSP}<meta charset=utf-8>\
         <meta name=viewport content=\"width=device-width, initial-scale=1\">\
         <title>tagloop session {}</title><style>{STYLE}</style></head><body>{body}</body></html>\n",
        esc(id)
    )
}

/// What the page shows, gathered from the events.
#[derive(Default)]
struct Page<'a> {
    task: Option<&'a str>,
    /// `model · api · role · started · session`, the parts the transcript has.
    about: Vec<String>,
    /// Notices before the first step.
    early: Vec<Item<'a>>,
    steps: Vec<Step<'a>>,
    outcome: Option<&'a Value>,
    /// Milliseconds in model turns and in tools (the transcript has no end time).
    model_ms: u64,
    tool_ms: u64,
}

/// One model turn of a step: the turn as written, and what came of it in order.
struct Step<'a> {
    n: u32,
    /// The step's second (or later) turn: the one before was refused.
    again: bool,
    final_only: bool,
    /// The turn's text, its continuations joined.
    written: String,
    /// Per model request: milliseconds, tokens, why it ended.
    requests: Vec<(u64, Usage, &'a Finish)>,
    /// What tagloop read from the turn (thought, call, final answer).
    parsed: Vec<Item<'a>>,
    /// What followed (the tool's run, corrections, notices, the observation).
    after: Vec<Item<'a>>,
}

enum Item<'a> {
    Thought(&'a str),
    Call(&'a str, &'a Value),
    Final(&'a Value),
    Tool(&'a str, bool, u64),
    Observation(&'a str),
    Correction(&'a str, &'a str),
    Notice(&'a str, &'a str),
    /// A `context_fitted` event, in the live view's words.
    Fitted(String),
}

impl<'a> Page<'a> {
    fn from_events(events: &'a [Event]) -> Self {
        let mut page = Page::default();
        for e in events {
            match e {
                Event::RunStarted {
                    task,
                    model,
                    api,
                    role,
                    started,
                    session,
                    ..
                } => {
                    page.task = Some(task);
                    let parts = [("model", model), ("api", api), ("role", role)];
                    let parts = parts
                        .into_iter()
                        .chain([("started", started), ("session", session)]);
                    page.about = parts
                        .filter(|(_, v)| !v.is_empty())
                        .map(|(k, v)| format!("{k} {}", esc(v)))
                        .collect();
                }
                Event::TurnStarted { step, final_only } => {
                    // One section per model turn (its continuations join it). A refused final
                    // answer costs no step: the next turn has the same step number.
                    let again = page.steps.last().is_some_and(|s| s.n == *step);
                    page.steps.push(Step {
                        n: *step,
                        again,
                        final_only: *final_only,
                        written: String::new(),
                        requests: Vec::new(),
                        parsed: Vec::new(),
                        after: Vec::new(),
                    });
                }
                Event::TurnFinished {
                    text,
                    finish,
                    usage,
                    elapsed_ms,
                    ..
                } => {
                    page.model_ms += elapsed_ms;
                    if let Some(s) = page.steps.last_mut() {
                        s.written.push_str(text);
                        s.requests.push((*elapsed_ms, *usage, finish));
                    }
                }
                Event::ToolFinished {
                    tool,
                    ok,
                    elapsed_ms,
                } => {
                    page.tool_ms += elapsed_ms;
                    page.push_after(Item::Tool(tool, *ok, *elapsed_ms));
                }
                Event::Thought { text } => page.push_parsed(Item::Thought(text)),
                Event::Action { tool, args } => page.push_parsed(Item::Call(tool, args)),
                Event::Final { value, .. } => page.push_parsed(Item::Final(value)),
                Event::Observation { text } => page.push_after(Item::Observation(text)),
                Event::Correction { kind, message } => {
                    page.push_after(Item::Correction(kind, message))
                }
                Event::Notice { kind, message } => page.push_after(Item::Notice(kind, message)),
                Event::Finished { outcome } => page.outcome = Some(outcome),
                Event::ContextFitted { .. } => {
                    if let Some(line) = super::live::describe_fit(e) {
                        page.push_after(Item::Fitted(line));
                    }
                }
                _ => {}
            }
        }
        page
    }

    fn push_parsed(&mut self, item: Item<'a>) {
        match self.steps.last_mut() {
            Some(s) => s.parsed.push(item),
            None => self.early.push(item),
        }
    }

    fn push_after(&mut self, item: Item<'a>) {
        match self.steps.last_mut() {
            Some(s) => s.after.push(item),
            None => self.early.push(item),
        }
    }

    /// The outcome block: status, answer or error, and the counts.
    fn outcome(&self, out: &mut String) {
        let Some(o) = self.outcome else {
            let _ = write!(
                out,
                "<section id=outcome class='outcome bad'><h1><span class=status>unfinished</span></h1>\
                 <p class=error>The run did not finish (killed or still running): {} so far.</p></section>",
                count(self.steps.len() as u64, "step")
            );
            return;
        };
        let status = o.get("status").and_then(Value::as_str).unwrap_or("?");
        let n = |k: &str| o.get(k).and_then(Value::as_u64).unwrap_or(0);
        let tokens = |k: &str| o.pointer(&format!("/usage/{k}")).and_then(Value::as_u64);
        let class = if status == "ok" {
            "outcome"
        } else {
            "outcome bad"
        };
        let _ = write!(
            out,
            "<section id=outcome class='{class}'><h1><span class=status>{}</span></h1><ul class=facts>",
            esc(status)
        );
        let facts = [
            count(n("steps"), "step"),
            count(n("llm_calls"), "model call"),
            format!(
                "{}+{} tokens",
                tokens("prompt_tokens").unwrap_or(0),
                tokens("completion_tokens").unwrap_or(0)
            ),
            format!(
                "{} (model {}, tools {})",
                duration(self.model_ms + self.tool_ms),
                duration(self.model_ms),
                duration(self.tool_ms)
            ),
        ];
        for f in facts {
            let _ = write!(out, "<li>{f}</li>");
        }
        out.push_str("</ul>");
        if let Some(answer) = o.get("final").filter(|v| !v.is_null()) {
            let _ = write!(
                out,
                "<div class=answer><h2>final answer</h2><pre>{}</pre></div>",
                esc(&value_text(answer))
            );
        }
        if let Some(e) = o.get("error").and_then(Value::as_str) {
            let _ = write!(out, "<p class=error>{}</p>", esc(e));
        }
        out.push_str("</section>");
    }

    /// The task, where and how it ran, and notices from before the first step.
    fn task(&self, out: &mut String) {
        out.push_str("<section id=task><h2>task</h2>");
        if let Some(t) = self.task {
            let _ = write!(out, "<pre>{}</pre>", esc(t));
        }
        if !self.about.is_empty() {
            let _ = write!(out, "<p class=meta>{}</p>", self.about.join(" · "));
        }
        for item in &self.early {
            item.render(out);
        }
        out.push_str("</section>");
    }
}

impl Step<'_> {
    fn render(&self, out: &mut String, turn: usize) {
        let again = if self.again { ", again" } else { "" };
        let only = if self.final_only {
            " (final answer only)"
        } else {
            ""
        };
        let _ = write!(
            out,
            "<section class=step id=turn-{turn}><h2>step {}{again}{only}</h2><div class=pair><div class=written><h3>as written</h3><pre>{}</pre>",
            self.n,
            esc(&self.written),
        );
        for (ms, usage, finish) in &self.requests {
            let _ = write!(
                out,
                "<p class=meta>model turn: {ms} ms · {}+{} tokens · ended: {}</p>",
                usage.prompt_tokens,
                usage.completion_tokens,
                esc(&finish_text(finish))
            );
        }
        out.push_str("</div><div class=parsed><h3>parsed</h3>");
        if self.parsed.is_empty() {
            out.push_str("<p class=meta>nothing tagloop could use</p>");
        }
        for item in &self.parsed {
            item.render(out);
        }
        out.push_str("</div></div>");
        for item in &self.after {
            item.render(out);
        }
        out.push_str("</section>");
    }
}

impl Item<'_> {
    fn render(&self, out: &mut String) {
        let _ = match self {
            Item::Thought(t) => write!(
                out,
                "<div class=thought><b>thought</b><pre>{}</pre></div>",
                esc(t)
            ),
            Item::Call(tool, args) => {
                let _ = write!(
                    out,
                    "<div class=call><b>call</b> <code>{}</code>",
                    esc(tool)
                );
                if let Some(obj) = args.as_object().filter(|o| !o.is_empty()) {
                    out.push_str("<table class=args>");
                    for (k, v) in obj {
                        let _ = write!(
                            out,
                            "<tr><th>{}</th><td><pre>{}</pre></td></tr>",
                            esc(k),
                            esc(&value_text(v))
                        );
                    }
                    out.push_str("</table>");
                }
                write!(out, "</div>")
            }
            Item::Final(v) => write!(
                out,
                "<div class=final><b>final answer</b><pre>{}</pre></div>",
                esc(&value_text(v))
            ),
            Item::Tool(tool, ok, ms) => {
                let ran = if *ok {
                    "ran"
                } else {
                    "<span class=bad>failed</span>"
                };
                write!(out, "<p class=meta>{} {ran} in {ms} ms</p>", esc(tool))
            }
            Item::Observation(text) => observation(out, text),
            Item::Correction(kind, message) => write!(
                out,
                "<div class=corr><b>correction: {}</b><pre>{}</pre></div>",
                esc(kind),
                esc(message)
            ),
            Item::Notice(kind, message) => {
                write!(out, "<p class=notice>◆ {}: {}</p>", esc(kind), esc(message))
            }
            Item::Fitted(line) => write!(out, "<p class=notice>◆ context: {}</p>", esc(line)),
        };
    }
}

/// An observation: shown whole when short, folded in a closed `<details>` when long.
fn observation(out: &mut String, text: &str) -> std::fmt::Result {
    // The tags are the protocol's wrapping, the same for every observation: the body is shown.
    let text = text.trim();
    let text = text
        .strip_prefix("<observation>")
        .and_then(|t| t.strip_suffix("</observation>"))
        .map_or(text, str::trim);
    let lines = text.lines().count();
    if lines <= FOLD_LINES && text.len() <= FOLD_BYTES {
        return write!(
            out,
            "<div class=obs><b>observation</b><pre>{}</pre></div>",
            esc(text)
        );
    }
    write!(
        out,
        "<details class=obs><summary>observation · {} · {} bytes</summary><pre>{}</pre></details>",
        count(lines as u64, "line"),
        text.len(),
        esc(text)
    )
}

/// Why a model request ended, in words.
fn finish_text(finish: &Finish) -> String {
    match finish {
        Finish::Stop(s) => format!("stop string {s}"),
        Finish::Length => "token limit".into(),
        Finish::End => "end of turn".into(),
        Finish::Repeated => "cut: repeating itself".into(),
    }
}

/// Milliseconds as a person reads them: `850 ms`, `3.2 s`.
fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// A JSON value as a person reads it: a string as its text, anything else as pretty JSON.
fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => serde_json::to_string_pretty(v).unwrap_or_default(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unfinished_run_still_opens_with_its_outcome() {
        let events = [
            Event::TurnStarted {
                step: 1,
                final_only: false,
            },
            Event::TurnFinished {
                text: "<thought>hm".into(),
                finish: Finish::Length,
                usage: Usage::default(),
                elapsed_ms: 1500,
                constraint: Default::default(),
            },
        ];
        let page = render_html("id", &events);
        let body = &page[page.find("<body>").unwrap() + 6..];
        assert!(
            body.starts_with("<section id=outcome class='outcome bad'>"),
            "{body}"
        );
        assert!(body.contains("did not finish (killed or still running): 1 step so far"));
        assert!(body.contains("&lt;thought&gt;hm</pre>"));
        assert!(body.contains("1500 ms · 0+0 tokens · ended: token limit"));
    }
}
