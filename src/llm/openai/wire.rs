//! The wire types: one lenient shape for streamed chunks and whole answers, chat and
//! completions alike (servers differ in which fields they send). Every field is
//! `#[serde(default)]` and `finish_reason` a plain string, so `""`, missing ids and fields a
//! server invents never fail a turn.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_and_whole_answers_read_leniently() {
        let raw = r#"{"choices":[{"index":0,"delta":{"content":"a\"b\n\u00e9"},"finish_reason":""}],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#;
        let c: WireChunk = serde_json::from_str(raw).unwrap();
        let choice = &c.choices[0];
        assert_eq!(
            choice.delta.as_ref().unwrap().content.as_deref(),
            Some("a\"b\né")
        );
        assert_eq!(choice.finish_reason.as_deref(), Some(""));
        assert_eq!(c.usage.unwrap().completion_tokens, 4);
        let c: WireChunk = serde_json::from_str(
            r#"{"choices":[{"index":0,"message":{"content":"done","reasoning_content":"r"}}]}"#,
        )
        .unwrap();
        let m = c.choices[0].message.as_ref().unwrap();
        assert_eq!(
            (m.content.as_deref(), m.reasoning_content.as_deref()),
            (Some("done"), Some("r"))
        );
    }
}
