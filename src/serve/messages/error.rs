//! A failure as Anthropic's error response: `{"type": "error", "error": {"type", "message"}}`
//! with the same HTTP status as the OpenAI face gives it (the SDKs read the status and retry 429
//! and 5xx on their own).

use axum::response::Response;
use serde_json::json;

use crate::serve::ServeError;

/// Anthropic's error `type` for a failure's status.
fn kind(e: &ServeError) -> &'static str {
    match e.status().as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// The response for `e`.
pub(crate) fn response(e: ServeError) -> Response {
    let body = json!({"type": "error", "error": {"type": kind(&e), "message": e.to_string()}});
    e.respond(body)
}
