//! The fitting itself, pure: a history in, the history to send and what was left out.
//!
//! The history is `[system, task, (turn, observation)*]`. The system prompt (with the role's
//! schema), the task (with the workflow context) and the last steps' turns are never touched. Of the
//! steps before them, oldest first, the fitter gives up what loses least, until it has saved the
//! bytes asked for:
//!
//! 1. long observations keep a head and a tail; the middle is replaced by a marker that says
//!    which lines were cut and how to see them again (`marker.rs`);
//! 2. then whole steps become one line each: the turn keeps only its `<action>`, the
//!    observation says how large the result was;
//! 3. then, as a last resort, the last steps' long observations are cut (their turns stay
//!    whole), as deep as needed, down to a short head and tail: one file read larger than the
//!    window could hold must not end the run while the model can read it in parts. The caller may
//!    ask this pass for less than the others ([`fit_messages_within`]): only enough that a turn
//!    still fits beside it, so that the model can act on what it read.
//!
//! Text after an observation (a follow-up question a continued run added to the same message)
//! is kept. What is sent is a copy: the run's own history, and so the transcript, stays whole.

use serde::{Deserialize, Serialize};

use crate::llm::{Message, Role};
use crate::policy::output_lines;

use super::marker::{self, StepCall};

/// An observation body longer than this is shortened in the first pass.
const SHORTEN_ABOVE: usize = 1536;
/// Bytes kept at the start of a shortened observation (cut back to a line end).
const HEAD_BYTES: usize = 768;
/// Bytes kept at its end (cut forward to a line start).
const TAIL_BYTES: usize = 256;
/// The shortest a kept step's observation is cut to in pass 3: head and tail together (half
/// each: a log's answer is at its end, a file's header at its start).
const SHORTEST_KEEP: usize = 384;
/// Room counted for the marker when pass 3 sizes a cut.
const MARKER_ROOM: usize = 192;

const OPEN: &str = "<observation>\n";
const CLOSE: &str = "\n</observation>";

/// What a fitting left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FitReport {
    /// Observations cut to a head and a tail.
    pub observations_cut: u32,
    /// Whole steps replaced by a one-line summary.
    pub steps_summarised: u32,
}

impl FitReport {
    /// Whether anything was left out.
    pub fn is_empty(&self) -> bool {
        self.observations_cut == 0 && self.steps_summarised == 0
    }
}

/// The history to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    /// The messages, shortened.
    pub messages: Vec<Message>,
    /// What was left out.
    pub report: FitReport,
    /// Bytes of message text saved; less than asked when even every summary was not enough.
    pub saved: usize,
}

/// Shorten `messages` (system, task, then turn and observation pairs) by at least `cut_bytes`
/// bytes of text if it can, keeping the system prompt, the task and the last `keep_last_steps`
/// steps (at least one) whole unless only cutting their long observations can save enough.
/// Pure and linear in the history's size.
pub fn fit_messages(messages: &[Message], cut_bytes: usize, keep_last_steps: usize) -> Fitted {
    fit_messages_within(messages, cut_bytes, cut_bytes, keep_last_steps)
}

/// [`fit_messages`], where the last resort (cutting the kept steps' long observations) stops
/// once `last_cut_bytes` are saved in all, even when `cut_bytes` are not: a caller that would
/// rather give the next turn a smaller budget than cut what the model just read deeper than it
/// must asks `cut_bytes` for the whole turn budget and `last_cut_bytes` for the smallest one.
pub fn fit_messages_within(
    messages: &[Message],
    cut_bytes: usize,
    last_cut_bytes: usize,
    keep_last_steps: usize,
) -> Fitted {
    let mut out = messages.to_vec();
    let mut report = FitReport::default();
    let mut saved = 0usize;
    let end = protected_from(messages, keep_last_steps.max(1));
    // The call of each step, read once and only when needed.
    let mut calls: Vec<Option<StepCall>> = (0..end).map(|_| None).collect();

    // Pass 1: long observations keep their head and tail.
    for i in 3..end {
        if saved >= cut_bytes {
            break;
        }
        if messages[i].role != Role::User || messages[i - 1].role != Role::Assistant {
            continue;
        }
        let call = calls[i - 1].get_or_insert_with(|| StepCall::read(&messages[i - 1].content));
        if let Some(short) = shorten_long(&messages[i].content, call) {
            saved += messages[i].content.len() - short.len();
            out[i].content = short;
            report.observations_cut += 1;
        }
    }

    // Pass 2: whole steps become one line each.
    for i in 2..end {
        if saved >= cut_bytes {
            break;
        }
        if messages[i].role != Role::Assistant {
            continue;
        }
        let call = calls[i].get_or_insert_with(|| StepCall::read(&messages[i].content));
        let turn = marker::summary_turn(call);
        let obs = (i + 1 < end && messages[i + 1].role == Role::User)
            .then(|| summarise(&messages[i + 1].content, call))
            .flatten();
        let now = out[i].content.len() + obs.as_ref().map_or(0, |_| out[i + 1].content.len());
        let then = turn.len() + obs.as_ref().map_or(0, String::len);
        if then >= now {
            continue;
        }
        saved += now - then;
        out[i].content = turn;
        if let Some(o) = obs {
            out[i + 1].content = o;
        }
        report.steps_summarised += 1;
    }

    // Pass 3, the last resort before the turn budget shrinks: the kept steps' long observations
    // keep a head and a tail too, as short as it takes. A single file read larger than what the
    // window has left would otherwise end the run, where the marker lets the model read the rest
    // in parts.
    for i in end.max(3)..messages.len() {
        if saved >= cut_bytes.min(last_cut_bytes) {
            break;
        }
        if messages[i].role != Role::User || messages[i - 1].role != Role::Assistant {
            continue;
        }
        let call = StepCall::read(&messages[i - 1].content);
        let need = cut_bytes.min(last_cut_bytes) - saved;
        if let Some(short) = shorten_to_save(&messages[i].content, &call, need) {
            saved += messages[i].content.len() - short.len();
            out[i].content = short;
            report.observations_cut += 1;
        }
    }
    Fitted {
        messages: out,
        report,
        saved,
    }
}

/// The index from which messages are kept whole: the `keep` last turns and what follows them.
/// Never below 2 (system prompt and task).
fn protected_from(messages: &[Message], keep: usize) -> usize {
    let mut seen = 0;
    for (i, m) in messages.iter().enumerate().skip(2).rev() {
        if m.role == Role::Assistant {
            seen += 1;
            if seen == keep {
                return i;
            }
        }
    }
    2
}

/// Where the observation's body is in a user message: `(start, end)` of the text between the
/// tags. The body was neutralised when it was rendered, so it holds no closing tag of its own.
fn body_span(content: &str) -> Option<(usize, usize)> {
    let start = content.find(OPEN)? + OPEN.len();
    let end = start + content[start..].find(CLOSE)?;
    Some((start, end))
}

/// The observation with its body cut to the usual head and tail, when it is long.
fn shorten_long(content: &str, call: &StepCall) -> Option<String> {
    let (start, end) = body_span(content)?;
    if end - start <= SHORTEN_ABOVE {
        return None;
    }
    shorten(content, call, HEAD_BYTES, TAIL_BYTES)
}

/// The observation with its body cut just enough to save `need` bytes, when it can be: head and
/// tail of equal size, never shorter than [`SHORTEST_KEEP`] together. Less is saved when even
/// that shortest form is not enough; `None` when the body is too short to cut at all.
fn shorten_to_save(content: &str, call: &StepCall, need: usize) -> Option<String> {
    let (start, end) = body_span(content)?;
    let mut keep = (end - start)
        .saturating_sub(need.saturating_add(MARKER_ROOM))
        .max(SHORTEST_KEEP);
    let mut best: Option<String> = None;
    // The marker and the cut to line ends make the saving differ from the estimate: at most
    // two corrections.
    for _ in 0..3 {
        let Some(short) = shorten(content, call, keep / 2, keep - keep / 2) else {
            break;
        };
        let got = content.len() - short.len();
        let done = got >= need || keep == SHORTEST_KEEP;
        best = Some(short);
        if done {
            break;
        }
        keep = keep.saturating_sub(need - got).max(SHORTEST_KEEP);
    }
    best
}

/// The observation with its body cut to a head (up to `head_bytes`, back to a line end) and a
/// tail (up to `tail_bytes`, forward to a line start) around a marker; `None` when that is not
/// shorter.
fn shorten(content: &str, call: &StepCall, head_bytes: usize, tail_bytes: usize) -> Option<String> {
    let (start, end) = body_span(content)?;
    let body = &content[start..end];
    if body.len() <= head_bytes + tail_bytes {
        return None;
    }
    // The head ends at a line end, the tail starts at a line start, when there are lines.
    let head_max = floor_char(body, head_bytes);
    let head = body[..head_max].rfind('\n').unwrap_or(head_max);
    let tail_min = ceil_char(body, body.len() - tail_bytes);
    let tail = body[tail_min..]
        .find('\n')
        .map_or(tail_min, |n| tail_min + n + 1);
    let (cut_from, cut_to) = (if head < head_max { head + 1 } else { head }, tail);
    if cut_to <= cut_from {
        return None;
    }
    let lines = tool_lines(body, line_of(body, cut_from), line_of(body, cut_to - 1));
    let mark = marker::cut_marker(call, lines, cut_to - cut_from);
    let mut s = String::with_capacity(content.len() - (cut_to - cut_from) + mark.len() + 2);
    s.push_str(&content[..start]);
    s.push_str(&body[..head]);
    s.push('\n');
    s.push_str(&mark);
    s.push('\n');
    s.push_str(&body[tail..]);
    s.push_str(&content[end..]);
    (s.len() < content.len()).then_some(s)
}

/// The cut body lines `first..=last` as the tool's own lines (1-based, inclusive): the header
/// the runtime writes above a tool's result and the notes below it are not the tool's lines.
/// `None` when no line of the tool's was cut. A body without a header is the tool's text alone.
fn tool_lines(body: &str, first: usize, last: usize) -> Option<(usize, usize)> {
    let (skip, count) = output_lines(body).unwrap_or((0, usize::MAX));
    let first = first.saturating_sub(skip).max(1);
    let last = last.saturating_sub(skip).min(count);
    (first <= last).then_some((first, last))
}

/// The observation replaced by one line that says how large the result was (text after it kept).
fn summarise(content: &str, call: &StepCall) -> Option<String> {
    let (start, end) = body_span(content)?;
    let body = &content[start..end];
    let lines = body.lines().count().max(1);
    let from = start - OPEN.len();
    let to = end + CLOSE.len();
    Some(format!(
        "{}{}{}",
        &content[..from],
        marker::summary_observation(call, body.len(), lines),
        &content[to..]
    ))
}

/// The 1-based line of byte `at`.
fn line_of(text: &str, at: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_bytes()[..at]).count() + 1
}

fn floor_char(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests;
