//! `tagloop replay --html`: a saved run as one self-contained HTML page.
//!
//! The page opens with the outcome (status, final answer or error, steps, model calls, tokens,
//! time), then the task, then one section per step: the turn as the model wrote it beside what
//! tagloop read from it (the thought, the tool and its arguments, or the final answer), the tool's
//! run, the observation (folded in a closed `<details>` when long), corrections and notices.
//!
//! Everything in the page that comes from a transcript (the model, tools, servers, the task) is
//! untrusted. The page is a minijinja template (`replay_html.j2`) whose every value goes through
//! one formatter ([`safe_text`]): controls made visible ([`terminal_safe`]), then minijinja's
//! HTML escaping; values only ever land in element text. The page also carries a content
//! security policy that forbids every script and every load (styles are inline), so an escape
//! missed one day still could not run code or tell anyone the page was opened.
//!
//! The page is built in two passes: the events are folded into a [`Page`] (the outcome is the
//! last event, but the first thing shown), then the template writes it out.

use minijinja::{AutoEscape, Environment, Output, State, Value as Jinja};
use serde::Serialize;
use serde_json::Value;

use tagloop::agent::Event;
use tagloop::llm::{Finish, Usage};

use super::live::{count, describe_fit};
use tagloop::shown::terminal_safe;

/// An observation longer than this many lines is folded.
const FOLD_LINES: usize = 12;
/// An observation longer than this many bytes is folded.
const FOLD_BYTES: usize = 1500;

/// The page's template.
const TEMPLATE: &str = include_str!("replay_html.j2");

/// One self-contained page: the outcome first, then the task and every step.
pub fn render_html(id: &str, events: &[Event]) -> Result<String, minijinja::Error> {
    let page = Page::from_events(events);
    let mut env = Environment::new();
    env.set_auto_escape_callback(|_| AutoEscape::Html);
    env.set_formatter(safe_text);
    env.add_template("replay", TEMPLATE)?;
    let view = View {
        id,
        outcome: page.outcome(),
        unfinished: count(page.steps.len() as u64, "step"),
        task: page.task,
        about: &page.about,
        early: &page.early,
        steps: &page.steps,
    };
    let mut html = env
        .get_template("replay")?
        .render(minijinja::value::Serde(&view))?;
    html.push('\n');
    Ok(html)
}

/// What the template is given.
#[derive(Serialize)]
struct View<'a> {
    id: &'a str,
    outcome: Option<Outcome>,
    /// The steps so far, for a run that did not finish.
    unfinished: String,
    task: Option<&'a str>,
    about: &'a [String],
    early: &'a [Item<'a>],
    steps: &'a [Step<'a>],
}

/// How every value is written into the page: text from a transcript with its controls and bidi
/// overrides first made visible by [`terminal_safe`] (they are invalid in HTML text, and an
/// override would reorder the page), then HTML-escaped by minijinja; the template's own markup
/// (macro output) as it is.
fn safe_text(
    out: &mut Output<'_>,
    state: &mut State<'_, '_>,
    value: &Jinja,
) -> Result<(), minijinja::Error> {
    match value.as_str() {
        Some(text) if !value.is_safe() => {
            minijinja::escape_formatter(out, state, &Jinja::from(terminal_safe(text).as_ref()))
        }
        _ => minijinja::escape_formatter(out, state, value),
    }
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

/// The outcome block: status, the counts, answer or error.
#[derive(Serialize)]
struct Outcome {
    status: String,
    facts: [String; 4],
    answer: Option<String>,
    error: Option<String>,
}

/// One model turn of a step: the turn as written, and what came of it in order.
#[derive(Serialize)]
struct Step<'a> {
    n: u32,
    /// The step's second (or later) turn: the one before was refused.
    again: bool,
    final_only: bool,
    /// The turn's text, its continuations joined.
    written: String,
    /// One per model request.
    requests: Vec<Request>,
    /// What tagloop read from the turn (thought, call, final answer).
    parsed: Vec<Item<'a>>,
    /// What followed (the tool's run, corrections, notices, the observation).
    after: Vec<Item<'a>>,
}

/// One model request of a turn: how long, how many tokens, why it ended.
#[derive(Serialize)]
struct Request {
    ms: u64,
    prompt_tokens: u64,
    completion_tokens: u64,
    ended: String,
}

/// One thing shown in a step, as the template's `item` macro draws it.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Item<'a> {
    Thought {
        text: &'a str,
    },
    Call {
        tool: &'a str,
        /// Name and value (as [`value_text`]) of each argument.
        args: Vec<(&'a str, String)>,
    },
    Final {
        text: String,
    },
    Tool {
        tool: &'a str,
        ok: bool,
        ms: u64,
    },
    /// Shown whole when short, folded in a closed `<details>` when long.
    Observation {
        text: &'a str,
        lines: String,
        bytes: usize,
        folded: bool,
    },
    Correction {
        kind: &'a str,
        message: &'a str,
    },
    Notice {
        kind: &'a str,
        message: &'a str,
    },
    /// A `context_fitted` event, in the live view's words.
    Fitted {
        line: String,
    },
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
                        .map(|(k, v)| format!("{k} {v}"))
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
                        s.requests.push(Request::new(*elapsed_ms, usage, finish));
                    }
                }
                Event::ToolFinished {
                    tool,
                    ok,
                    elapsed_ms,
                    ..
                } => {
                    page.tool_ms += elapsed_ms;
                    page.push_after(Item::Tool {
                        tool,
                        ok: *ok,
                        ms: *elapsed_ms,
                    });
                }
                Event::Thought { text } => page.push_parsed(Item::Thought { text }),
                Event::Action { tool, args } => page.push_parsed(Item::Call {
                    tool,
                    args: args
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(k, v)| (k.as_str(), value_text(v)))
                        .collect(),
                }),
                Event::Final { value, .. } => page.push_parsed(Item::Final {
                    text: value_text(value),
                }),
                Event::Observation { text } => page.push_after(Item::observation(text)),
                Event::Correction { kind, message } => {
                    page.push_after(Item::Correction { kind, message })
                }
                Event::Notice { kind, message } => page.push_after(Item::Notice { kind, message }),
                Event::Finished { outcome } => page.outcome = Some(outcome),
                Event::ContextFitted { .. } => {
                    if let Some(line) = describe_fit(e) {
                        page.push_after(Item::Fitted { line });
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

    /// The outcome block, or `None` for a run that did not finish.
    fn outcome(&self) -> Option<Outcome> {
        let o = self.outcome?;
        let n = |k: &str| o.get(k).and_then(Value::as_u64).unwrap_or(0);
        let tokens = |k: &str| {
            o.pointer(&format!("/usage/{k}"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        Some(Outcome {
            status: o
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .into(),
            facts: [
                count(n("steps"), "step"),
                count(n("llm_calls"), "model call"),
                format!(
                    "{}+{} tokens",
                    tokens("prompt_tokens"),
                    tokens("completion_tokens")
                ),
                format!(
                    "{} (model {}, tools {})",
                    duration(self.model_ms + self.tool_ms),
                    duration(self.model_ms),
                    duration(self.tool_ms)
                ),
            ],
            answer: o.get("final").filter(|v| !v.is_null()).map(value_text),
            error: o.get("error").and_then(Value::as_str).map(str::to_owned),
        })
    }
}

impl Request {
    fn new(ms: u64, usage: &Usage, finish: &Finish) -> Self {
        let ended = match finish {
            Finish::Stop(s) => format!("stop string {s}"),
            Finish::Length => "token limit".into(),
            Finish::End => "end of turn".into(),
            Finish::Repeated => "cut: repeating itself".into(),
        };
        Request {
            ms,
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            ended,
        }
    }
}

impl<'a> Item<'a> {
    /// An observation's body (the protocol's wrapping tags, the same for every observation,
    /// left out), folded when long.
    fn observation(text: &'a str) -> Self {
        let text = text.trim();
        let text = text
            .strip_prefix("<observation>")
            .and_then(|t| t.strip_suffix("</observation>"))
            .map_or(text, str::trim);
        let lines = text.lines().count();
        Item::Observation {
            text,
            lines: count(lines as u64, "line"),
            bytes: text.len(),
            folded: lines > FOLD_LINES || text.len() > FOLD_BYTES,
        }
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
        let page = render_html("id", &events).unwrap();
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
