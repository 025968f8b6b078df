//! The wire types: one lenient shape for streamed chunks and whole answers, chat and
//! completions alike (servers differ in which fields they send).

use serde::Deserialize;
use serde_json::Value;

/// Lenient wire type for both streamed chunks and whole answers, chat and completions.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WireChunk {
    /// Choices (only index 0 is used).
    pub(crate) choices: Vec<WireChoice>,
    /// Usage, on the last chunk or the whole answer.
    pub(crate) usage: Option<WireUsage>,
    /// An in-band error object or string.
    pub(crate) error: Option<Value>,
}

/// One choice of a [`WireChunk`].
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WireChoice {
    /// Choice index.
    pub(crate) index: u32,
    /// Streamed chat delta.
    pub(crate) delta: Option<WireMessage>,
    /// Whole chat message.
    pub(crate) message: Option<WireMessage>,
    /// Completions text.
    pub(crate) text: Option<String>,
    /// `stop`, `length`, `""`, or anything a server invents.
    pub(crate) finish_reason: Option<String>,
    /// vLLM: the stop string (or token id) that ended the turn.
    pub(crate) stop_reason: Option<Value>,
    /// Some servers put reasoning on the choice for completions.
    pub(crate) reasoning_content: Option<String>,
}

/// Chat message or delta.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WireMessage {
    /// Text.
    pub(crate) content: Option<String>,
    /// DeepSeek / vLLM / llama.cpp reasoning.
    pub(crate) reasoning_content: Option<String>,
    /// Ollama / OpenRouter reasoning.
    pub(crate) reasoning: Option<String>,
}

/// Usage as servers send it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WireUsage {
    /// Prompt tokens.
    pub(crate) prompt_tokens: u64,
    /// Completion tokens.
    pub(crate) completion_tokens: u64,
}
