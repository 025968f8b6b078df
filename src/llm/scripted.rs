//! The scripted model (`--model scripted:PATH`): replays model turns from a file, in order,
//! without any network.
//!
//! # File format
//!
//! A UTF-8 text file. Turns are separated by lines that are exactly `=== turn ===`:
//!
//! ```text
//! Anything before the first separator is a comment and is ignored.
//! === turn ===
//! <thought>I should read the file.</thought>
//! <action>read_file(path="notes.txt")</action>
//! === turn ignore-stops ===
//! <thought>Done.</thought>
//! <final_answer>42</final_answer>
//! <observation>this is cut by the client-side scanner</observation>
//! ```
//!
//! * A separator line may carry flags after `turn`: `=== turn ignore-stops ===` makes that turn
//!   behave like a server that ignores `stop` (the whole text is streamed and the client-side
//!   stop scanner cuts it, reported as [`Enforcer::Client`]). Unknown flags are an error.
//! * A turn's text is everything between its separator and the next one (or the end of the
//!   file), with **one** trailing newline removed (`\n` or `\r\n`). Everything else is literal:
//!   lines starting with `#` are *not* comments, blank lines and indentation are kept.
//!   A separator line may end in `\r` (files saved with CRLF line ends).
//!
//! # Semantics
//!
//! Each [`Model::turn`] call consumes the next turn; asking for more turns than the script has
//! is an error ("the script … has only N turns"). Like a server that honours `stop`, the text is
//! cut at the first of the request's stop strings ([`Finish::Stop`], [`Enforcer::Server`]); the
//! cut text is then streamed in small chunks through the same [`StopScanner`] the HTTP client
//! uses (so a trailing partial stop such as `</act` is removed too). A turn with no stop in it
//! ends as [`Finish::End`]. The degeneration guard watches the stream as the HTTP client's does:
//! a turn whose tail repeats itself ends as [`Finish::Repeated`], cut after the first unit
//! (unless the request sets `keep_repetitions`). Usage is an estimate: prompt and completion tokens are the byte
//! lengths divided by 4, rounded up. No sleeps, no network.
//!
//! The scripted model supports prefill: when the loop continues a turn, the continuation is
//! simply the next scripted turn.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::{
    DeltaSink, Enforcer, Finish, LlmError, Model, Prompt, TurnFuture, TurnRequest, TurnResult,
    Usage,
};
use crate::policy::RepeatGuard;
use crate::scan::StopScanner;

/// Bytes per streamed delta.
const CHUNK: usize = 16;

/// One scripted model turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptTurn {
    /// The text the "model" writes.
    pub text: String,
    /// Behave like a server that ignores `stop`.
    pub ignore_stops: bool,
    /// 1-based line of the separator that starts this turn.
    pub line: usize,
}

/// A parsed script: the turns in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// Where it came from (a path, or `<inline>`).
    pub name: String,
    /// The turns in file order; each is played once, and asking past the last one is
    /// [`LlmError::OutOfTurns`].
    pub turns: Vec<ScriptTurn>,
}

impl Script {
    /// Read and parse a script file.
    pub fn load(path: impl AsRef<Path>) -> Result<Arc<Script>, LlmError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| LlmError::ScriptIo {
            path: path.to_owned(),
            source,
        })?;
        let mut script = Script::parse(&text)?;
        script.name = path.display().to_string();
        Ok(Arc::new(script))
    }

    /// Parse a script from text (named `<inline>`).
    pub fn parse(text: &str) -> Result<Script, LlmError> {
        let name = "<inline>".to_owned();
        let mut turns: Vec<ScriptTurn> = Vec::new();
        let mut current: Option<(ScriptTurn, usize)> = None; // (turn, byte start of its text)
        let mut offset = 0;
        for (i, raw_line) in text.split_inclusive('\n').enumerate() {
            let line_no = i + 1;
            let line = raw_line.trim_end_matches('\n').trim_end_matches('\r');
            if let Some(flags) = separator_flags(line) {
                let mut ignore_stops = false;
                for flag in flags.split_whitespace() {
                    match flag {
                        "ignore-stops" => ignore_stops = true,
                        other => {
                            return Err(LlmError::ScriptFormat {
                                name,
                                line: line_no,
                                message: format!(
                                    "unknown turn flag '{other}' (known: ignore-stops)"
                                ),
                            });
                        }
                    }
                }
                if let Some((mut turn, start)) = current.take() {
                    turn.text = strip_one_newline(&text[start..offset]).to_owned();
                    turns.push(turn);
                }
                current = Some((
                    ScriptTurn {
                        text: String::new(),
                        ignore_stops,
                        line: line_no,
                    },
                    offset + raw_line.len(),
                ));
            }
            offset += raw_line.len();
        }
        if let Some((mut turn, start)) = current.take() {
            turn.text = strip_one_newline(&text[start.min(text.len())..]).to_owned();
            turns.push(turn);
        }
        Ok(Script { name, turns })
    }

    /// Number of turns.
    pub fn len(&self) -> usize {
        self.turns.len()
    }

    /// Whether the script has no turns.
    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }
}

/// `Some(flags)` when the line is a turn separator.
fn separator_flags(line: &str) -> Option<&str> {
    let inner = line.strip_prefix("=== turn")?.strip_suffix("===")?;
    // `=== turn ===` leaves " "; flags must be separated by spaces.
    if !inner.is_empty() && inner.starts_with(' ') && inner.ends_with(' ') {
        Some(inner.trim())
    } else {
        None
    }
}

fn strip_one_newline(s: &str) -> &str {
    s.strip_suffix("\r\n")
        .or_else(|| s.strip_suffix('\n'))
        .unwrap_or(s)
}

/// Estimated tokens for a text: bytes / 4, rounded up.
pub(crate) fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// A [`Model`] that replays a [`Script`].
#[derive(Debug)]
pub struct ScriptedModel {
    script: Arc<Script>,
    next: AtomicUsize,
    /// The window the caller states (`--context-window N`): a script has none of its own.
    context_window: Option<u64>,
}

impl ScriptedModel {
    /// Replay from the first turn.
    pub fn new(script: Arc<Script>) -> Self {
        Self::starting_at(script, 0)
    }

    /// Replay from turn `n` (0-based), e.g. to continue a killed run.
    pub fn starting_at(script: Arc<Script>, n: usize) -> Self {
        ScriptedModel {
            script,
            next: AtomicUsize::new(n),
            context_window: None,
        }
    }

    /// The same model, reporting `window` as its context window (so offline runs and tests can
    /// exercise context fitting). It counts no tokens: [`Model::count_tokens`] stays `Ok(None)`,
    /// and the caller estimates.
    pub fn with_context_window(mut self, window: Option<u64>) -> Self {
        self.context_window = window;
        self
    }

    /// Turns consumed so far (the index of the next turn).
    pub fn position(&self) -> usize {
        self.next.load(Ordering::SeqCst)
    }

    /// The script being replayed, whole (turns already played included; see
    /// [`position`](Self::position)).
    pub fn script(&self) -> &Arc<Script> {
        &self.script
    }

    fn play(&self, req: &TurnRequest, on_delta: DeltaSink<'_>) -> Result<TurnResult, LlmError> {
        let started = Instant::now();
        let index = self.next.fetch_add(1, Ordering::SeqCst);
        let Some(turn) = self.script.turns.get(index) else {
            return Err(LlmError::OutOfTurns {
                name: self.script.name.clone(),
                turns: self.script.len(),
                asked: index + 1,
            });
        };
        // A server that honours `stop` cuts the text; one that ignores it sends everything.
        let (sent, server_stop) = if turn.ignore_stops {
            (turn.text.as_str(), None)
        } else {
            let (cut, idx) = StopScanner::cut(&turn.text, &req.stop);
            (cut, idx.and_then(|i| req.stop.get(i)).cloned())
        };
        let mut scanner = StopScanner::new(&req.stop);
        let mut guard = RepeatGuard::for_request(req, req.grammar.is_some());
        let mut repeated = None;
        let mut first_token: Option<Duration> = None;
        let mut rest = sent;
        while !rest.is_empty() && !scanner.is_stopped() && repeated.is_none() {
            let mut end = rest.len().min(CHUNK);
            while !rest.is_char_boundary(end) {
                end += 1;
            }
            let safe = scanner.push(&rest[..end]);
            if !safe.is_empty() {
                first_token.get_or_insert_with(|| started.elapsed());
                on_delta(safe);
            }
            if let Some(g) = &mut guard {
                repeated = g.check(scanner.text());
            }
            rest = &rest[end..];
        }
        let (finish, enforced_by) = match (scanner.stopped(), repeated, server_stop) {
            (Some(s), _, _) => (Finish::Stop(s.to_owned()), Some(Enforcer::Client)),
            (None, Some(_), _) => (Finish::Repeated, None),
            (None, None, Some(s)) => (Finish::Stop(s), Some(Enforcer::Server)),
            (None, None, None) => (Finish::End, None),
        };
        scanner.finish();
        let mut text = scanner.into_text();
        if let Some(rep) = repeated {
            text.truncate(rep.cut);
        }
        let prompt_len: usize = match &req.prompt {
            Prompt::Chat(messages) => messages.iter().map(|m| m.content.len()).sum(),
            Prompt::Text(t) => t.len(),
        };
        let usage = Usage {
            prompt_tokens: (prompt_len as u64).div_ceil(4),
            completion_tokens: estimate_tokens(&text),
        };
        Ok(TurnResult {
            text,
            finish,
            enforced_by,
            reasoning: None,
            usage,
            elapsed: started.elapsed(),
            first_token,
            constraint: Default::default(),
        })
    }
}

impl Model for ScriptedModel {
    fn turn<'a>(&'a self, request: &'a TurnRequest, on_delta: DeltaSink<'a>) -> TurnFuture<'a> {
        Box::pin(async move { self.play(request, on_delta) })
    }

    fn supports_prefill(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        format!("scripted:{}", self.script.name)
    }

    fn context_window(&self) -> Option<u64> {
        self.context_window
    }
}
