//! Model clients: one trait for a model turn, an OpenAI-compatible client for `/chat/completions`
//! and `/completions`, and a scripted model that replays a file.
//!
//! Every client enforces the stop strings on its own side ([`StopScanner`]), whatever the server does.

mod error;
mod grammar;
mod notice;
pub mod openai;
mod scripted;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use error::LlmError;
pub use grammar::{Constraint, GrammarMode, GrammarSyntax, LazyGrammar, TurnGrammar};
pub use notice::{LOG_TARGET as NOTICE_LOG_TARGET, Notice, NoticeKind, NoticeSink};
pub use scripted::{Script, ScriptTurn, ScriptedModel};

use crate::policy::Watch;
pub use crate::policy::{RepeatGuard, Repetition, RepetitionKind};
pub use crate::scan::{BlockCheck, RepeatedBlock, StopScanner};
pub use crate::upstream::{ContextOverflow, ServerKind};

/// Which endpoint, and so which prompt shape, a model is driven through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `/chat/completions`: a system message, the task, then assistant turns and observations as messages.
    #[default]
    Chat,
    /// `/completions`: one growing text (base models).
    Completions,
}

impl Api {
    /// `chat` or `completions`.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Completions => "completions",
        }
    }
}

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The system prompt.
    System,
    /// The task and every observation.
    User,
    /// The model's own turns.
    Assistant,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// What it says.
    pub content: String,
}

impl Message {
    /// A message with the given role and content.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
        }
    }
}

/// What the model is asked to continue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Prompt {
    /// Chat messages for `/chat/completions`. When the last message is the assistant's, the
    /// model is asked to continue it (prefill).
    Chat(Vec<Message>),
    /// One text for `/completions`, continued as it is.
    Text(String),
}

/// One request for a model turn.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TurnRequest {
    /// The conversation to continue: messages for [`Api::Chat`], one text for
    /// [`Api::Completions`] (the OpenAI client refuses the other shape with [`LlmError::Config`]).
    pub prompt: Prompt,
    /// Stop strings; the client enforces all of them and sends at most four to the server.
    pub stop: Vec<String>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Token limit for the turn.
    pub max_tokens: Option<u32>,
    /// Sampling seed.
    pub seed: Option<i64>,
    /// Turn the degeneration guard off: by default a turn whose tail repeats itself (see
    /// [`RepeatGuard`]) is cut at once and ends as [`Finish::Repeated`].
    pub keep_repetitions: bool,
    /// While none of these strings has appeared in the turn, the degeneration guard is strict
    /// (a unit holding words said three times over 96 bytes ends the turn; see
    /// [`RepeatGuard`]). The agent sets the decision's tags when its grammar holds the thought
    /// to one line, where nothing repeats legitimately, and `<action>` alone when the answer is
    /// free text too, whose sentences do not repeat legitimately either. Empty: the ordinary
    /// guard throughout.
    pub strict_repeats_until: Vec<String>,
    /// In a constrained turn, cut a line that runs on without a word (a counting runaway:
    /// dates, digits, a list of numbers counted on; see [`RepeatGuard`]). The agent sets it for
    /// its own turns; `tagloop serve` sets it unless the client's messages hold such a line
    /// themselves, since a call may rightly copy a long list of numbers from them.
    pub cut_counting: bool,
    /// End the turn before a block between these tags that repeats one the turn already closed
    /// (see [`RepeatedBlock`]): the turn then ends as [`Finish::Stop`] at the closing tag, its
    /// text ending with the last block that differed. Enforced by the OpenAI client.
    pub end_at_repeated_block: Option<RepeatedBlock>,
    /// Extra vendor fields merged into the request body.
    pub extra: Map<String, Value>,
    /// The grammar of the turn, for clients that can have the server constrain sampling to it
    /// (shared: it is the same for every turn of a run).
    pub grammar: Option<Arc<TurnGrammar>>,
    /// Where the client reports what the caller should see during the turn (a retry, a refused
    /// grammar or `stop`), as it happens; `None` leaves them to the logs only.
    pub notices: Option<NoticeSink>,
}

impl TurnRequest {
    /// Report `notice` to [`TurnRequest::notices`], when there is a sink.
    pub fn notify(&self, notice: Notice) {
        if let Some(sink) = &self.notices {
            sink.send(&notice);
        }
    }
}

impl RepeatGuard {
    /// The guard a request asks for: none with `keep_repetitions`, else the default one —
    /// when the turn is `constrained` (its grammar was sent; a free turn's thought is not held to
    /// one line), strict until one of the request's `strict_repeats_until` strings appears, and
    /// watching for counting runaways where the request's `cut_counting` asks (the guard itself
    /// is the decision room's, `src/policy/repeat.rs`; this reads the request into its plain
    /// [`Watch`]).
    pub fn for_request(req: &TurnRequest, constrained: bool) -> Option<Self> {
        let watch = if constrained {
            Watch {
                strict_until: req.strict_repeats_until.clone(),
                cut_counting: req.cut_counting,
            }
        } else {
            Watch::default()
        };
        (!req.keep_repetitions).then(|| RepeatGuard::watching(watch))
    }
}

impl Default for Prompt {
    fn default() -> Self {
        Prompt::Text(String::new())
    }
}

/// Why a turn ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason", content = "stop")]
pub enum Finish {
    /// A stop string fired (which one).
    Stop(String),
    /// The token limit was reached.
    Length,
    /// The model ended the turn itself.
    End,
    /// The degeneration guard cut the turn: its tail repeated one unit of text over and over
    /// (see [`RepeatGuard`]). The text keeps the first unit of the repetition.
    Repeated,
}

impl Finish {
    /// Whether the turn was cut short (the degeneration guard's repetition, or the token
    /// limit), rather than ended by a stop string or by the model.
    pub(crate) fn was_cut(&self) -> bool {
        matches!(self, Finish::Repeated | Finish::Length)
    }
}

/// Who cut the text at the stop string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcer {
    /// The server stopped at it.
    Server,
    /// The server went past it (or kept it) and the client cut the text.
    Client,
}

/// Token counts for a turn, as the server reported them (zero when it did not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
}

impl Usage {
    /// Add another turn's counts.
    pub fn add(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
    }
}

/// The final record of a model turn. A [`Model`] outside this crate makes one with
/// [`TurnResult::new`] and sets the fields it knows (`usage`, `reasoning`, …): a field added
/// later then breaks no implementation.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TurnResult {
    /// The text up to (not including) the stop string.
    pub text: String,
    /// Why the turn ended.
    pub finish: Finish,
    /// Who enforced the stop, when one fired.
    pub enforced_by: Option<Enforcer>,
    /// Reasoning the server sent separately (`reasoning_content`).
    pub reasoning: Option<String>,
    /// Token usage.
    pub usage: Usage,
    /// Wall-clock time of the turn, retries included.
    pub elapsed: Duration,
    /// Time to the first text delta, when streaming.
    pub first_token: Option<Duration>,
    /// Whether a grammar constrained the turn.
    pub constraint: Constraint,
}

impl TurnResult {
    /// A turn of `text` that ended for `finish`, with nothing else known yet: no usage, no
    /// separate reasoning, no timings, unconstrained.
    pub fn new(text: impl Into<String>, finish: Finish) -> Self {
        TurnResult {
            text: text.into(),
            finish,
            enforced_by: None,
            reasoning: None,
            usage: Usage::default(),
            elapsed: Duration::ZERO,
            first_token: None,
            constraint: Constraint::default(),
        }
    }
}

/// Receives text deltas while a turn streams (already cut at stops: no partial stop string is ever passed).
pub type DeltaSink<'a> = &'a mut (dyn FnMut(&str) + Send);

/// What [`Model::turn`] returns: the turn as a boxed future, so that the trait stays usable as
/// `dyn Model`. An implementation writes `Box::pin(async move { … })`.
pub type TurnFuture<'a> = BoxFuture<'a, Result<TurnResult, LlmError>>;

/// What the agent loop asks for turns: [`openai::OpenAiModel`] for a server,
/// [`scripted::ScriptedModel`] to replay a script.
pub trait Model: Send + Sync {
    /// Run one turn, passing text deltas to `on_delta` as they arrive.
    fn turn<'a>(&'a self, request: &'a TurnRequest, on_delta: DeltaSink<'a>) -> TurnFuture<'a>;

    /// Whether a chat request ending in an assistant message continues that message (prefill).
    fn supports_prefill(&self) -> bool {
        false
    }

    /// A short description for logs and transcripts (never includes a key).
    fn describe(&self) -> String;

    /// Whether the client may send a grammar ([`TurnRequest::grammar`]): when false, the loop
    /// does not build one.
    fn wants_grammar(&self) -> bool {
        false
    }

    /// Settle what [`Model::wants_grammar`] answers before a run's first turn: a client that
    /// detects its server's kind does it here (once per client; concurrent runs wait for the
    /// one detection), so runs for a server that takes no grammar never build one. The loop
    /// calls it once per run; the default does nothing.
    fn prepare(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// The model's context window in tokens (prompt and turn together), when known: stated by
    /// the caller or learned from the server in [`Model::prepare`]. `None` means unknown, and
    /// the loop then does no context fitting. Call it after `prepare`.
    fn context_window(&self) -> Option<u64> {
        None
    }

    /// How many tokens `prompt` takes for the server's own tokenizer, when the server can tell
    /// (`/tokenize`); `Ok(None)` when it cannot, and the caller estimates instead. One request
    /// to the server per call, so callers ask only when the answer could change what they send.
    fn count_tokens<'a>(
        &'a self,
        _prompt: &'a Prompt,
    ) -> BoxFuture<'a, Result<Option<u64>, LlmError>> {
        Box::pin(async { Ok(None) })
    }
}
