//! The Response object (`"object": "response"`): what `POST /v1/responses` answers whole,
//! what the stream's `response.created` / `.in_progress` / `.completed` / `.failed` events
//! carry, and what `GET /v1/responses/{id}` reads back. Every field the Open Responses
//! specification lists is there (`null` where serve has nothing to say); the request's settings
//! are repeated from its [`Echo`].

use serde_json::{Value, json};

use super::output::End;
use super::request::Echo;
use crate::serve::response::AnswerMeta;

/// Where a response is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Being answered (the stream's first events).
    InProgress,
    Completed,
    /// Cut by `max_output_tokens`.
    Incomplete,
    /// Broken off (the stream's `response.failed`).
    Failed,
}

impl Status {
    /// The status of an answer that ended this way (`None`: it did not end).
    pub(crate) fn of(end: Option<End>) -> Status {
        match end {
            None => Status::Failed,
            Some(End { cut: true, .. }) => Status::Incomplete,
            Some(_) => Status::Completed,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
            Status::Incomplete => "incomplete",
            Status::Failed => "failed",
        }
    }
}

/// What a response says of itself besides its output.
pub(crate) struct About<'a> {
    pub meta: &'a AnswerMeta,
    pub echo: &'a Echo,
    pub warnings: &'a [String],
}

/// The Response object with `output` and `status`; `end` gives the usage, `error` the failure.
pub(crate) fn resource(
    about: &About<'_>,
    output: &[Value],
    status: Status,
    end: Option<End>,
    error: Option<&str>,
) -> Value {
    let echo = about.echo;
    let usage = end.map(|e| {
        let (input, output) = (e.usage.prompt_tokens, e.usage.completion_tokens);
        json!({"input_tokens": input, "output_tokens": output,
            "total_tokens": input.saturating_add(output),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0}})
    });
    let finished = matches!(status, Status::Completed | Status::Incomplete);
    let mut value = json!({
        "id": about.meta.id,
        "object": "response",
        "created_at": about.meta.created,
        "completed_at": finished.then(super::store::now),
        "status": status.name(),
        "incomplete_details": (status == Status::Incomplete)
            .then(|| json!({"reason": "max_output_tokens"})),
        "model": about.meta.model,
        "previous_response_id": echo.previous_response_id,
        "instructions": echo.instructions,
        "output": output,
        "error": error.map(|m| json!({"code": "server_error", "message": m})),
        "tools": echo.tools,
        "tool_choice": echo.tool_choice,
        "truncation": "disabled",
        "parallel_tool_calls": echo.parallel_tool_calls,
        "text": {"format": echo.text_format},
        "top_p": echo.top_p.unwrap_or(1.0),
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "top_logprobs": 0,
        "temperature": echo.temperature.unwrap_or(1.0),
        "reasoning": echo.reasoning,
        "usage": usage,
        "max_output_tokens": echo.max_output_tokens,
        "max_tool_calls": echo.max_tool_calls,
        "store": echo.store,
        "background": false,
        "service_tier": "default",
        "metadata": echo.metadata,
        "safety_identifier": null,
        "prompt_cache_key": null,
    });
    if !about.warnings.is_empty() {
        // Not in the specification; clients ignore fields they do not know.
        value["warnings"] = json!(about.warnings);
    }
    value
}
