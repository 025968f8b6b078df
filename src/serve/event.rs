//! What one answer of the endpoint is made of, in the order a client should see it: the core
//! produces these, and the whole answer or the streamed chunks are built from them.

use crate::llm::Usage;

/// One piece of an answer, as the endpoint learns it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ServeEvent {
    /// More of the model's thought (goes out as `reasoning_content`).
    Reasoning(String),
    /// More of the answer text (goes out as `content`), sent only once the turn is known to be
    /// an answer and, under `response_format`, once it validated.
    Content(String),
    /// One complete, validated tool call.
    ToolCall(ToolCallOut),
    /// The answer is complete: why it ended, and the usage summed over every upstream request
    /// made for it. Always the last event.
    Done {
        /// `stop`, `tool_calls` or `length`.
        finish_reason: FinishReason,
        /// Tokens of every upstream request made for this answer, repairs included.
        usage: Usage,
    },
}

/// A tool call as the client receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallOut {
    /// The call's position in the answer's `tool_calls` (0-based).
    pub index: u32,
    /// The call's id (`call_…`), which the client's `tool` message quotes back.
    pub id: String,
    /// The function's name, as the client declared it.
    pub name: String,
    /// The arguments as a JSON object's text (OpenAI sends them as a string).
    pub arguments: String,
}

/// OpenAI's `finish_reason` of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A text answer.
    Stop,
    /// One or more tool calls.
    ToolCalls,
    /// The token limit was reached before the answer was complete.
    Length,
}

/// Add `e` to an answer's kept events, joining it to the last one when both are text of the
/// same kind: a whole answer, or a streamed one kept for its transcript, then holds its text
/// once, not one event (and one allocation) per upstream delta. The answer rendered from the
/// kept events is the same either way.
pub(crate) fn keep(events: &mut Vec<ServeEvent>, e: ServeEvent) {
    match (events.last_mut(), e) {
        (Some(ServeEvent::Content(text)), ServeEvent::Content(more))
        | (Some(ServeEvent::Reasoning(text)), ServeEvent::Reasoning(more)) => text.push_str(&more),
        (_, e) => events.push(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_text_is_joined_and_other_events_stay_apart() {
        let mut events = Vec::new();
        for e in [
            ServeEvent::Reasoning("a".into()),
            ServeEvent::Reasoning("b".into()),
            ServeEvent::Content("c".into()),
            ServeEvent::Content("d".into()),
            ServeEvent::Reasoning("e".into()),
        ] {
            keep(&mut events, e);
        }
        assert_eq!(
            events,
            [
                ServeEvent::Reasoning("ab".into()),
                ServeEvent::Content("cd".into()),
                ServeEvent::Reasoning("e".into()),
            ]
        );
    }
}
