//! A failure as the Responses API's error response: `{"error": {"message", "type", "param",
//! "code"}}` with the HTTP status the other faces give it. Unlike the chat face's, `code` is
//! always a string (the Open Responses specification requires one): the specific code where
//! there is one, else the type.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::serve::ServeError;

/// The error `type` and `code` for a failure.
fn kind(e: &ServeError) -> (&'static str, &'static str) {
    match e {
        ServeError::ContextLength { .. } => ("invalid_request_error", "context_length_exceeded"),
        ServeError::Unauthorized => ("invalid_request_error", "invalid_api_key"),
        ServeError::TooLarge { .. } => ("invalid_request_error", "request_too_large"),
        ServeError::Busy { .. } => ("rate_limit_error", "rate_limit_exceeded"),
        ServeError::SlowBody { .. } => ("invalid_request_error", "request_timeout"),
        ServeError::Timeout { .. } => ("timeout_error", "timeout"),
        ServeError::Upstream { .. } | ServeError::Relay { .. } => {
            ("upstream_error", "upstream_error")
        }
        ServeError::BadRequest { .. } => ("invalid_request_error", "invalid_request_error"),
        _ => ("server_error", "server_error"),
    }
}

/// The response for `e`.
pub(crate) fn response(e: ServeError) -> Response {
    let (kind, code) = kind(&e);
    let param = match &e {
        ServeError::BadRequest { param, .. } => param.clone(),
        ServeError::ContextLength { .. } => Some("input".into()),
        _ => None,
    };
    let body =
        json!({"error": {"message": e.to_string(), "type": kind, "param": param, "code": code}});
    e.respond(body)
}

/// The 404 of a response id that is not there for this key (missing, expired, deleted, or
/// another key's: the same words for all, so a key learns nothing of another's ids); `id` is
/// already made safe to quote.
pub(crate) fn not_found(id: &str) -> Response {
    let message = format!("no response with id '{id}' was found");
    let body = json!({"error": {"message": message, "type": "invalid_request_error",
        "param": "response_id", "code": "not_found"}});
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}
