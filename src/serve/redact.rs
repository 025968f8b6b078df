//! The upstream key kept out of the core's answers: an upstream that writes the key it was sent
//! into its turn (an argument of a call, the answer's text, its reasoning) must not hand it to
//! the client, whole or streamed.
//!
//! Every event goes through one [`EventRedactor`] before it leaves the core's task: a tool call
//! is complete when it is emitted, so it is redacted whole (its arguments as text, and again as
//! parsed JSON, where `\u` escapes could hide the key); the answer's text and its reasoning come
//! in deltas, so each goes through a [`StreamRedactor`], which holds back the end of what it got
//! until the next delta shows whether a key was split there.

use serde_json::Value;

use super::event::{ServeEvent, ToolCallOut};
use crate::secret::{Redactor, StreamRedactor};

/// Redacts the events of one answer, in order.
#[derive(Debug)]
pub(crate) struct EventRedactor {
    redactor: Redactor,
    reasoning: StreamRedactor,
    content: StreamRedactor,
}

impl EventRedactor {
    /// A redactor for one answer's events.
    pub(crate) fn new(redactor: &Redactor) -> Self {
        EventRedactor {
            redactor: redactor.clone(),
            reasoning: StreamRedactor::new(redactor.clone()),
            content: StreamRedactor::new(redactor.clone()),
        }
    }

    /// The events to send for `event` (none while a delta is held back, the held text first
    /// when a call or the end comes).
    pub(crate) fn pass(&mut self, event: ServeEvent) -> Vec<ServeEvent> {
        let mut out = Vec::new();
        match event {
            ServeEvent::Reasoning(text) => {
                push_text(&mut out, ServeEvent::Reasoning, self.reasoning.push(&text));
            }
            ServeEvent::Content(text) => {
                // The reasoning comes before the answer: what is held of it goes first.
                push_text(&mut out, ServeEvent::Reasoning, self.reasoning.finish());
                push_text(&mut out, ServeEvent::Content, self.content.push(&text));
            }
            ServeEvent::ToolCall(call) => {
                out.extend(self.finish());
                out.push(ServeEvent::ToolCall(self.call(call)));
            }
            done @ ServeEvent::Done { .. } => {
                out.extend(self.finish());
                out.push(done);
            }
        }
        out
    }

    /// What is still held back, as events: for an answer that ends without
    /// [`ServeEvent::Done`] (the core failed after sending some of it).
    pub(crate) fn finish(&mut self) -> Vec<ServeEvent> {
        let mut out = Vec::new();
        push_text(&mut out, ServeEvent::Reasoning, self.reasoning.finish());
        push_text(&mut out, ServeEvent::Content, self.content.finish());
        out
    }

    fn call(&self, mut call: ToolCallOut) -> ToolCallOut {
        call.name = self.redactor.redact_string(call.name);
        call.arguments = self.redactor.redact_string(call.arguments);
        // The key written with JSON escapes (`\u0073k-…`) is only seen once the text is read.
        if let Ok(mut args) = serde_json::from_str::<Value>(&call.arguments) {
            let before = args.clone();
            self.redactor.redact_json(&mut args);
            if args != before {
                call.arguments = args.to_string();
            }
        }
        call
    }
}

fn push_text(out: &mut Vec<ServeEvent>, make: fn(String) -> ServeEvent, text: String) {
    if !text.is_empty() {
        out.push(make(text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::FinishReason;

    const KEY: &str = "sk-upstream-0123456789abcdef";

    fn text_of(events: &[ServeEvent]) -> (String, String) {
        let (mut reasoning, mut content) = (String::new(), String::new());
        for e in events {
            match e {
                ServeEvent::Reasoning(t) => reasoning.push_str(t),
                ServeEvent::Content(t) => content.push_str(t),
                _ => {}
            }
        }
        (reasoning, content)
    }

    #[test]
    fn deltas_that_split_the_key_are_redacted_and_nothing_else_is_lost() {
        let mut r = EventRedactor::new(&Redactor::with([KEY]));
        let thought = format!("the header was Bearer {KEY}, so");
        let answer = format!("Your key is {KEY}. Done.");
        let mut out = Vec::new();
        for piece in thought.as_bytes().chunks(3) {
            let piece = std::str::from_utf8(piece).unwrap_or_default().to_owned();
            out.extend(r.pass(ServeEvent::Reasoning(piece)));
        }
        for piece in answer.as_bytes().chunks(5) {
            let piece = std::str::from_utf8(piece).unwrap_or_default().to_owned();
            out.extend(r.pass(ServeEvent::Content(piece)));
        }
        out.extend(r.pass(ServeEvent::Done {
            finish_reason: FinishReason::Stop,
            usage: Default::default(),
        }));
        for e in &out {
            assert!(!format!("{e:?}").contains("0123456789"), "{e:?}");
        }
        let (reasoning, content) = text_of(&out);
        assert_eq!(reasoning, "the header was Bearer [redacted], so");
        assert_eq!(content, "Your key is [redacted]. Done.");
        // The reasoning all comes before the answer, and Done last.
        let first_content = out.iter().position(|e| matches!(e, ServeEvent::Content(_)));
        let last_reasoning = out
            .iter()
            .rposition(|e| matches!(e, ServeEvent::Reasoning(_)));
        assert!(last_reasoning < first_content, "{out:?}");
        assert!(matches!(out.last(), Some(ServeEvent::Done { .. })));
    }

    #[test]
    fn a_call_is_redacted_whole_even_behind_json_escapes() {
        let mut r = EventRedactor::new(&Redactor::with([KEY]));
        let escaped: String = KEY
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        for arguments in [
            format!(r#"{{"auth": "Bearer {KEY}"}}"#),
            format!(r#"{{"auth": "{escaped}"}}"#),
        ] {
            let out = r.pass(ServeEvent::ToolCall(ToolCallOut {
                index: 0,
                id: "call_1".into(),
                name: "fetch".into(),
                arguments,
            }));
            let [ServeEvent::ToolCall(call)] = out.as_slice() else {
                panic!("{out:?}");
            };
            let args: Value = serde_json::from_str(&call.arguments).unwrap_or_default();
            let auth = args["auth"].as_str().unwrap_or_default();
            assert!(auth.contains("[redacted]") && !auth.contains(KEY), "{auth}");
        }
    }
}
