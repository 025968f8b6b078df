//! A server's refusal of a prompt longer than its context window, read from its error answer.
//!
//! Every server says it its own way, and most say the sizes only in words:
//!
//! * **llama.cpp**: `{"error": {"code": 400, "type": "exceed_context_size_error", "message":
//!   "request (25837 tokens) exceeds the available context size (25088 tokens), try increasing
//!   it", "n_prompt_tokens": 25837, "n_ctx": 25088}}` — the one with fields, read first. (With
//!   context shift on it says "input (N tokens) is larger than the max context size (M tokens)".)
//! * **vLLM**: "This model's maximum context length is 2048 tokens. However, you requested 3000
//!   tokens (2000 in the messages, 1000 in the completion)…", and in newer versions
//!   "'max_tokens' … is too large: 1000. This model's maximum context length is 2048 tokens and
//!   your request has 2000 input tokens (1000 > 2048 - 2000)" (the request is then input plus
//!   budget).
//! * **SGLang**: "The input (3000 tokens) is longer than the model's context length (2048
//!   tokens)", or "… maximum context length of 2048 tokens. You requested a total of 3000 tokens…".
//! * **OpenAI**: `code: "context_length_exceeded"`, "This model's maximum context length is 8192
//!   tokens. However, your messages resulted in 9000 tokens…".
//!
//! A message that names a context but no sizes still counts (with the sizes unknown): the caller
//! then only knows that it must send less.

use serde_json::Value;

/// A server's refusal of a prompt longer than its context window (what the model client's
/// `LlmError::context_overflow` says).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ContextOverflow {
    /// The tokens the server counted for the request (prompt, plus the turn's budget when the
    /// server counts it in), when it says.
    pub requested: Option<u64>,
    /// The server's window in tokens, when it says.
    pub window: Option<u64>,
}

/// Where a window's size follows, in a server's lower-cased message.
const WINDOW_AFTER: &[&str] = &[
    "maximum context length is",
    "maximum context length of",
    "context size (",
    "context length (",
];

/// Where the request's size follows, most specific first.
const REQUESTED_AFTER: &[&str] = &[
    "requested a total of",
    "you requested",
    "resulted in",
    "request has",
    "request (",
    "input (",
];

impl ContextOverflow {
    /// A refusal with these sizes (tests, and clients other than tagloop's own).
    pub fn new(requested: Option<u64>, window: Option<u64>) -> Self {
        ContextOverflow { requested, window }
    }

    /// Reads a whole error body: JSON (its fields first, then its message's words) or text.
    pub(crate) fn from_body(body: &str) -> Option<ContextOverflow> {
        match serde_json::from_str::<Value>(body) {
            Ok(v) => ContextOverflow::from_value(&v),
            Err(_) => ContextOverflow::from_text(body),
        }
    }

    /// Reads an error object: a whole body, or the `error` of an in-band stream event. llama.cpp's
    /// `n_prompt_tokens` and `n_ctx` beat what the words say; a `type` or `code` naming the
    /// overflow counts even when the words do not.
    pub(crate) fn from_value(v: &Value) -> Option<ContextOverflow> {
        let inner = v.get("error").filter(|e| e.is_object()).unwrap_or(v);
        let said = |key: &str| inner.get(key).and_then(Value::as_str);
        let message = said("message")
            .or_else(|| v.get("error").and_then(Value::as_str))
            .or_else(|| v.get("detail").and_then(Value::as_str))
            .unwrap_or("");
        let tagged = ["type", "code"].iter().any(|k| {
            matches!(
                said(k),
                Some("exceed_context_size_error" | "context_length_exceeded")
            )
        });
        let mut overflow = match ContextOverflow::from_text(message) {
            Some(o) => o,
            None if tagged => ContextOverflow::default(),
            None => return None,
        };
        let field = |key: &str| inner.get(key).and_then(Value::as_u64).filter(|n| *n > 0);
        overflow.requested = field("n_prompt_tokens").or(overflow.requested);
        overflow.window = field("n_ctx").or(overflow.window);
        Some(overflow)
    }

    /// Reads a server's error text (see the module docs for the shapes); `None` when it is not
    /// about the context window.
    pub(crate) fn from_text(message: &str) -> Option<ContextOverflow> {
        let m = message.to_ascii_lowercase();
        let said = m.contains("exceed_context_size")
            || m.contains("context_length_exceeded")
            || (m.contains("context")
                && [
                    "exceed",
                    "longer than",
                    "larger than",
                    "maximum context length",
                ]
                .iter()
                .any(|w| m.contains(w)));
        if !said {
            return None;
        }
        let window = WINDOW_AFTER.iter().find_map(|p| number_after(&m, p));
        let mut requested = REQUESTED_AFTER.iter().find_map(|p| number_after(&m, p));
        // vLLM's newer wording counts the input only, and names the turn's budget apart
        // ("is too large: 1000 … your request has 2000 input tokens").
        if m.contains("request has")
            && let (Some(input), Some(budget)) = (requested, number_after(&m, "too large:"))
        {
            requested = input.checked_add(budget);
        }
        Some(ContextOverflow { requested, window })
    }
}

/// The first whole number after the first `phrase` in `text` (spaces, `(` and `:` skipped).
fn number_after(text: &str, phrase: &str) -> Option<u64> {
    let rest = &text[text.find(phrase)? + phrase.len()..];
    let rest = rest.trim_start_matches([' ', '(', ':']);
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..digits].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(o: Option<ContextOverflow>) -> Option<(Option<u64>, Option<u64>)> {
        o.map(|o| (o.requested, o.window))
    }

    #[test]
    fn every_server_shape_gives_its_numbers() {
        let llama = r#"{"error":{"code":400,"message":"request (25837 tokens) exceeds the available context size (25088 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":25837,"n_ctx":25088}}"#;
        assert_eq!(
            sizes(ContextOverflow::from_body(llama)),
            Some((Some(25837), Some(25088)))
        );
        // The fields win over the words when they disagree.
        let fields = r#"{"error":{"code":400,"message":"request (1 tokens) exceeds the available context size (2 tokens)","type":"exceed_context_size_error","n_prompt_tokens":30,"n_ctx":20}}"#;
        assert_eq!(
            sizes(ContextOverflow::from_body(fields)),
            Some((Some(30), Some(20)))
        );
        let shift =
            "input (3000 tokens) is larger than the max context size (2048 tokens). skipping";
        assert_eq!(
            sizes(ContextOverflow::from_text(shift)),
            Some((Some(3000), Some(2048)))
        );
        let vllm = r#"{"object":"error","message":"This model's maximum context length is 2048 tokens. However, you requested 3000 tokens (2000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#;
        assert_eq!(
            sizes(ContextOverflow::from_body(vllm)),
            Some((Some(3000), Some(2048)))
        );
        let vllm_new = "'max_tokens' or 'max_completion_tokens' is too large: 1000. This model's maximum context length is 2048 tokens and your request has 2000 input tokens (1000 > 2048 - 2000). (parameter=max_tokens, value=1000)";
        assert_eq!(
            sizes(ContextOverflow::from_text(vllm_new)),
            Some((Some(3000), Some(2048)))
        );
        let sglang = r#"{"object":"error","message":"The input (3000 tokens) is longer than the model's context length (2048 tokens).","type":"BadRequestError","param":null,"code":400}"#;
        assert_eq!(
            sizes(ContextOverflow::from_body(sglang)),
            Some((Some(3000), Some(2048)))
        );
        let sglang_total = "Requested token count exceeds the model's maximum context length of 2048 tokens. You requested a total of 3000 tokens: 2000 tokens from the input messages and 1000 tokens for the completion.";
        assert_eq!(
            sizes(ContextOverflow::from_text(sglang_total)),
            Some((Some(3000), Some(2048)))
        );
        let openai = r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        assert_eq!(
            sizes(ContextOverflow::from_body(openai)),
            Some((Some(9000), Some(8192)))
        );
        // A code that names it is enough, even with words that do not.
        let coded = r#"{"error":{"message":"too many tokens","code":"context_length_exceeded"}}"#;
        assert_eq!(sizes(ContextOverflow::from_body(coded)), Some((None, None)));
    }

    #[test]
    fn other_errors_are_not_overflows() {
        for body in [
            r#"{"error":{"message":"Unsupported parameter: 'stop' is not supported with this model.","param":"stop"}}"#,
            r#"{"error":"model \"x\" not found, try pulling it first"}"#,
            "max_tokens must be at least 1, got 0",
            "the context file is missing",
            "",
        ] {
            assert_eq!(ContextOverflow::from_body(body), None, "{body}");
        }
    }

    #[test]
    fn numbers_are_read_only_where_the_phrase_says() {
        assert_eq!(
            number_after("context size (12 tokens)", "context size ("),
            Some(12)
        );
        assert_eq!(number_after("context size (x)", "context size ("), None);
        assert_eq!(number_after("no phrase", "context size ("), None);
        // A number too large for u64 is no number.
        assert_eq!(
            number_after("request (99999999999999999999999 tokens)", "request ("),
            None
        );
    }
}
