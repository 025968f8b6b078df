//! Notices: what a person watching a run should be told about a model turn while it happens (a
//! retry after a failed request, the server refusing the grammar or `stop`, a turn cut because it
//! repeated itself), as values rather than log lines.
//!
//! A log line written to the terminal in the middle of a streamed turn breaks the text the user
//! is reading; a notice is handed to the caller ([`TurnRequest::notices`](super::TurnRequest)),
//! which decides where it goes (the CLI's live view draws it on a line of its own, a transcript
//! keeps it). The same facts are still logged with `tracing`, under the target [`LOG_TARGET`], so
//! `RUST_LOG` shows them too; a front end that shows notices can switch that target off.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::text::clip_bytes;

/// The `tracing` target of the log lines that repeat a notice (`tagloop::notice`): a front end
/// that shows notices itself filters it out of its default log output.
pub const LOG_TARGET: &str = "tagloop::notice";

/// Bytes of an error quoted in a notice: enough for a status line and a reason, not a whole
/// error page (the log line keeps it whole).
const QUOTE_BYTES: usize = 300;

/// `err`'s text for a notice, cut to [`QUOTE_BYTES`] (`…` marks the cut).
pub(crate) fn quote(err: &dyn fmt::Display) -> String {
    clip_bytes(&err.to_string(), QUOTE_BYTES)
}

/// What kind of thing happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NoticeKind {
    /// A request failed in a way worth trying again; the client waits, then asks again.
    Retry,
    /// The server refused the grammar; the turn is asked again without it, and no later turn
    /// sends one.
    GrammarRejected,
    /// The server refused the `stop` field; the turn is asked again without it (the stop
    /// strings stay enforced on the client's side).
    StopRejected,
    /// The turn kept repeating itself and was cut after the first repetition.
    RepetitionCut,
    /// The transcript could not be written; the run goes on without it.
    TranscriptFailed,
    /// A constrained turn never left its thought (cut as repeating, or out of tokens): the
    /// thought was closed there and the turn continued with the action or the answer alone.
    ThoughtCut,
    /// The server refused to continue the assistant's own turn (prefill): that turn ends where
    /// it was, and no turn is continued over chat from then on.
    PrefillRejected,
    /// The server refused to stream (a 400 to `stream: true`); the turn is asked again for a
    /// whole answer, and no later turn streams (stops stay enforced on the client's side).
    StreamRejected,
    /// The turn was over while the server was still writing it (a stop it was not sent or
    /// went past, a repetition, the turn's byte cap): its stream was dropped, which closes the
    /// connection and stops the generation.
    StreamCut,
}

impl NoticeKind {
    /// The snake_case name (`retry`, `grammar_rejected`, …), as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::Retry => "retry",
            NoticeKind::GrammarRejected => "grammar_rejected",
            NoticeKind::StopRejected => "stop_rejected",
            NoticeKind::RepetitionCut => "repetition_cut",
            NoticeKind::TranscriptFailed => "transcript_failed",
            NoticeKind::ThoughtCut => "thought_cut",
            NoticeKind::PrefillRejected => "prefill_rejected",
            NoticeKind::StreamRejected => "stream_rejected",
            NoticeKind::StreamCut => "stream_cut",
        }
    }
}

impl fmt::Display for NoticeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One notice: its kind and a sentence for a person. The message may quote a server's error
/// (untrusted text): a caller that prints it makes it safe for its medium first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    /// What happened.
    pub kind: NoticeKind,
    /// One sentence saying what happened and what the client does about it.
    pub message: String,
}

impl Notice {
    /// A notice of `kind` saying `message`.
    pub fn new(kind: NoticeKind, message: impl Into<String>) -> Self {
        Notice {
            kind,
            message: message.into(),
        }
    }
}

/// Where a model client sends the notices of a turn. Called on the client's task, in order,
/// while the turn runs: it must return quickly and must not block (hand the notice on).
///
/// Two sinks compare equal when they are the same closure (so [`TurnRequest`](super::TurnRequest)
/// keeps its `PartialEq`).
#[derive(Clone)]
pub struct NoticeSink(Arc<dyn Fn(&Notice) + Send + Sync>);

impl NoticeSink {
    /// A sink calling `f` for every notice.
    pub fn new(f: impl Fn(&Notice) + Send + Sync + 'static) -> Self {
        NoticeSink(Arc::new(f))
    }

    /// Hand `notice` to the sink.
    pub fn send(&self, notice: &Notice) {
        (self.0)(notice)
    }
}

impl fmt::Debug for NoticeSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NoticeSink(..)")
    }
}

impl PartialEq for NoticeSink {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
