//! The proxy's own key: where a client presents it, whether a request carries it, and what a
//! refusal does to the connection. `http.rs` checks it on every face's route, `passthrough/`
//! before anything else, and `responses/` binds stored conversations to what was presented.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;

use crate::secret::Secret;

/// The key a client presents: its bearer token or, as Anthropic's clients send it, `x-api-key`;
/// none is the empty key.
pub(crate) fn presented(headers: &HeaderMap) -> &str {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .unwrap_or_default()
}

/// Whether the request carries `key` (compared in constant time); with no key configured every
/// request does.
pub(crate) fn carries(key: Option<&Secret>, headers: &HeaderMap) -> bool {
    let Some(key) = key else {
        return true;
    };
    // `subtle` compares the bytes in constant time (the length is not a secret).
    bool::from(subtle::ConstantTimeEq::ct_eq(
        presented(headers).as_bytes(),
        key.expose().as_bytes(),
    ))
}

/// A 401 closes its connection (`Connection: close`, which hyper honours): a client without
/// the key gets one refusal per connection and cannot keep a kept-alive connection, and so a
/// place under `--max-connections`, for itself by asking again now and then (issue 44 item 4).
pub(crate) async fn close_after_refusal(mut response: Response) -> Response {
    if response.status() == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}
