//! Events: everything the loop does, as it happens.
//!
//! The same records go to the caller's [`EventSink`] (the CLI's live view and `--events`) and,
//! except text deltas, into the session transcript.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::llm::{Constraint, Finish, Message, Usage};

use super::Progress;

/// One thing that happened during a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A run began; a continued session (`tagloop continue`) has one of these per run, and the
    /// first one's `task` is the session's task.
    RunStarted {
        /// The session id (empty when no transcript is written).
        #[serde(default)]
        session: String,
        /// The task as the user gave it.
        task: String,
        /// The model, as the client describes it (never a key).
        #[serde(default)]
        model: String,
        /// `chat` or `completions`.
        #[serde(default)]
        api: String,
        /// The role's name.
        #[serde(default)]
        role: String,
        /// How many steps the run may take before only a final answer is accepted.
        #[serde(default)]
        max_steps: u32,
        /// When (RFC 3339, UTC).
        #[serde(default)]
        started: String,
        /// Caller-supplied facts for continuing the run (CLI options, never secrets).
        #[serde(default)]
        meta: Value,
        /// The follow-up question this run begins with (`tagloop continue ID MESSAGE`), as the
        /// user gave it: the run's question from here on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        question: Option<String>,
    },
    /// A message entered the history (the system prompt, the task, an assistant turn, an observation).
    Message {
        /// Its role and text, as it is sent to the model.
        message: Message,
    },
    /// A model turn is about to be requested.
    TurnStarted {
        /// The step it belongs to (1-based).
        step: u32,
        /// Whether this turn may only give a final answer (the step limit was reached).
        final_only: bool,
    },
    /// Text arrived from the model (not written to transcripts).
    TextDelta {
        /// A piece of the reply as it streams (already cut at stop strings); the request's final
        /// text comes in the `TurnFinished` that follows when the request succeeds.
        text: String,
    },
    /// One model request ended; a turn continued after being cut (completions, or a server that
    /// takes a prefill) gives one of these per request.
    TurnFinished {
        /// The text this request produced, before any parsing.
        text: String,
        /// Why it ended.
        finish: Finish,
        /// Tokens used by this turn.
        usage: Usage,
        /// Milliseconds the turn took.
        elapsed_ms: u64,
        /// Whether a grammar constrained the turn: `none`, `grammar` or `lazy_grammar`.
        #[serde(default)]
        constraint: Constraint,
    },
    /// The turn's thought.
    Thought {
        /// The joined thought text.
        text: String,
    },
    /// The turn's call, bound to an existing tool; sent before the loop guard judges it, so a
    /// refused repeat has an `Action` but no `ToolStarted`.
    Action {
        /// The tool's registered name (a call to an unknown tool is a `Correction` instead).
        tool: String,
        /// The arguments bound to the tool's JSON Schema (an object by parameter name).
        args: Value,
    },
    /// A tool call began; a `ToolFinished` for it always follows, also on error or timeout.
    ToolStarted {
        /// The name of the tool running.
        tool: String,
    },
    /// A tool call ended, whether or not it succeeded.
    ToolFinished {
        /// The name of the tool that ran.
        tool: String,
        /// False when the tool returned an error (a refusal included) or ran past the tool timeout.
        ok: bool,
        /// Milliseconds it took.
        elapsed_ms: u64,
        /// The tool's part of the observation (the header that names the call, then its output
        /// or its error), as the model reads it: what a continued run's loop guard remembers of
        /// the call (`memory.rs`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<String>,
    },
    /// The runtime corrected the model (a parse error, an unknown tool, a refused final answer, …).
    Correction {
        /// What kind of correction (`parse_error`, `unknown_tool`, `bad_arguments`, `no_decision`,
        /// `truncated`, `repetition`, `empty_final`, `invalid_final`, `named_files`, `loop`,
        /// `final_only`).
        kind: String,
        /// The message given to the model.
        message: String,
    },
    /// The decision step judged the run's first call (`first_call.rs`): kept, or declined and
    /// the turn asked again for an answer only.
    Decision {
        /// The tool the turn called.
        tool: String,
        /// The function the model named for the question asked alone (`None` when the question
        /// names the workspace, so nothing was asked, or the answer named none).
        #[serde(default)]
        guess: Option<String>,
        /// Whether the call was declined (not run).
        declined: bool,
        /// Why, in one sentence.
        why: String,
    },
    /// Something the user should know while the run goes on, never shown to the model: a
    /// retried request, a grammar or `stop` the server refused, a turn cut because it repeated
    /// itself, a transcript that could not be written (see [`crate::llm::Notice`]).
    Notice {
        /// What happened: `retry`, `grammar_rejected`, `stop_rejected`, `repetition_cut`,
        /// `thought_cut`, `prefill_rejected`, `transcript_failed` (more may come).
        kind: String,
        /// One sentence for a person (may quote a server's error: untrusted text).
        message: String,
    },
    /// The history was fitted into the model's context window before a request (see
    /// [`crate::agent::context`]): the model was sent less than the history holds, and this says
    /// what was left out. The history itself, the `message` records and so `continue` and
    /// `replay` keep everything.
    ContextFitted {
        /// The step whose request was fitted (1-based).
        step: u32,
        /// The window fitted to, in tokens (the one the server named when it refused a prompt).
        window: u64,
        /// The prompt's tokens before fitting.
        tokens_before: u64,
        /// The prompt's tokens as sent.
        tokens_after: u64,
        /// Whether `tokens_before` is the server's own count (else an estimate).
        counted: bool,
        /// Old observations cut to a head and a tail.
        observations_cut: u32,
        /// Old steps replaced by a one-line summary.
        steps_summarised: u32,
        /// The turn's token budget as sent (smaller than asked when the window is nearly full).
        max_tokens: Option<u32>,
        /// The window left room only for a final answer: this turn may only give one.
        final_only: bool,
        /// The server had refused the prompt as too long: this is the one retry, fitted harder.
        after_refusal: bool,
    },
    /// An observation was sent to the model.
    Observation {
        /// Its full text, tags included.
        text: String,
    },
    /// A step completed; everything before this record can be restored when continuing.
    StepCompleted {
        /// How far the run has got.
        #[serde(flatten)]
        progress: Progress,
    },
    /// A final answer was accepted.
    Final {
        /// The answer: the JSON value when the role has an output schema, else a JSON string.
        value: Value,
        /// Leniencies used to read it.
        warnings: Vec<String>,
    },
    /// The run's last event; a run whose future is dropped (cancelled) ends without one.
    Finished {
        /// The run's outcome as JSON (the `tagloop run --json` object).
        outcome: Value,
    },
}

/// Receives events as they happen.
pub type EventSink = Arc<dyn Fn(&Event) + Send + Sync>;
