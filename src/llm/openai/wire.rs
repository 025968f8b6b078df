//! The wire types: one lenient shape for streamed chunks and whole answers, chat and
//! completions alike (servers differ in which fields they send).
//!
//! Text fields borrow from the event they are read from when they can (no escapes in them):
//! a streamed turn is dozens of events, and each would otherwise allocate its text. A whole
//! answer arrives through async-openai as [`OwnedChunk`].

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Lenient wire type for both streamed chunks and whole answers, chat and completions.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WireChunk<'a> {
    /// Choices (only index 0 is used).
    #[serde(borrow)]
    pub(crate) choices: Vec<WireChoice<'a>>,
    /// Usage, on the last chunk or the whole answer.
    pub(crate) usage: Option<WireUsage>,
    /// An in-band error object or string.
    pub(crate) error: Option<Value>,
}

/// One choice of a [`WireChunk`].
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WireChoice<'a> {
    /// Choice index.
    pub(crate) index: u32,
    /// Streamed chat delta.
    #[serde(borrow)]
    pub(crate) delta: Option<WireMessage<'a>>,
    /// Whole chat message.
    #[serde(borrow)]
    pub(crate) message: Option<WireMessage<'a>>,
    /// Completions text.
    #[serde(borrow, deserialize_with = "text")]
    pub(crate) text: Option<Cow<'a, str>>,
    /// `stop`, `length`, `""`, or anything a server invents.
    #[serde(borrow, deserialize_with = "text")]
    pub(crate) finish_reason: Option<Cow<'a, str>>,
    /// vLLM: the stop string (or token id) that ended the turn.
    pub(crate) stop_reason: Option<Value>,
    /// Some servers put reasoning on the choice for completions.
    #[serde(borrow, deserialize_with = "text")]
    pub(crate) reasoning_content: Option<Cow<'a, str>>,
}

/// Chat message or delta.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WireMessage<'a> {
    /// Text.
    #[serde(borrow, deserialize_with = "text")]
    pub(crate) content: Option<Cow<'a, str>>,
    /// DeepSeek / vLLM / llama.cpp reasoning.
    #[serde(borrow, deserialize_with = "text")]
    pub(crate) reasoning_content: Option<Cow<'a, str>>,
    /// Ollama / OpenRouter reasoning.
    #[serde(borrow, deserialize_with = "text")]
    pub(crate) reasoning: Option<Cow<'a, str>>,
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

/// A text field: borrowed from the input when it has no escapes, `None` for `null`. (serde
/// borrows a `Cow` on its own, but not one inside an `Option`.)
fn text<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'a, str>>, D::Error> {
    struct Text;
    impl<'de> serde::de::Visitor<'de> for Text {
        type Value = Option<Cow<'de, str>>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string or null")
        }
        fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Borrowed(v)))
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_owned())))
        }
        fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v)))
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_str(Text)
        }
    }
    d.deserialize_option(Text)
}

/// A whole answer, owning its text (async-openai needs a type that borrows nothing).
#[derive(Debug, Default)]
pub(crate) struct OwnedChunk(pub(crate) WireChunk<'static>);

impl<'de> Deserialize<'de> for OwnedChunk {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        WireChunk::deserialize(value)
            .map(OwnedChunk)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_and_escaped_text_is_decoded() {
        let raw = br#"{"id":"x","choices":[{"index":0,"delta":{"content":"<thought>hi"},"logprobs":null,"finish_reason":null}]}"#;
        let c: WireChunk = serde_json::from_slice(raw).unwrap();
        let content = c.choices[0]
            .delta
            .as_ref()
            .unwrap()
            .content
            .as_ref()
            .unwrap();
        assert!(matches!(content, Cow::Borrowed("<thought>hi")));
        let raw = br#"{"choices":[{"index":0,"delta":{"content":"a\"b\n\u00e9"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#;
        let c: WireChunk = serde_json::from_slice(raw).unwrap();
        let choice = &c.choices[0];
        assert_eq!(
            choice.delta.as_ref().unwrap().content.as_deref(),
            Some("a\"b\né")
        );
        assert_eq!(choice.finish_reason.as_deref(), Some("stop"));
        assert_eq!(c.usage.unwrap().completion_tokens, 4);
    }

    #[test]
    fn a_whole_answer_reads_into_an_owned_chunk() {
        let c: OwnedChunk = serde_json::from_str(
            r#"{"choices":[{"index":0,"message":{"content":"done","reasoning_content":"r"}}]}"#,
        )
        .unwrap();
        let m = c.0.choices[0].message.as_ref().unwrap();
        assert_eq!(
            (m.content.as_deref(), m.reasoning_content.as_deref()),
            (Some("done"), Some("r"))
        );
    }
}
