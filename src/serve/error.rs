//! What can go wrong in the endpoint, and how each failure reaches an OpenAI client: an HTTP
//! status and OpenAI's error object, `{"error": {"message", "type", "param", "code"}}`, which
//! every OpenAI SDK turns into its own exception.
//!
//! The streamed answer's mid-way failure uses the same object as one `data:` event (see
//! `chunks.rs`), because that is where the OpenAI SDKs look for it in a stream.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// A failure of the endpoint, answered to the client as an OpenAI error object.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The upstream server gave nothing that can be relayed: it could not be reached, answered
    /// with a redirect (never followed), sent more than the proxy reads, or took too long.
    /// `status` is what the client gets (502, or 504 for a time limit); `message` is safe to
    /// show a client (it names no address or key of the upstream).
    #[error("{message}")]
    Upstream {
        /// The HTTP status the client gets.
        status: u16,
        /// What happened, in words a client may read.
        message: String,
    },
    /// The endpoint's own settings are wrong (a base URL that is not one, a key a header
    /// cannot carry): found when it is built, before any request.
    #[error("serve configuration: {0}")]
    Config(String),
}

impl ServeError {
    /// The HTTP answer a client gets for this failure: the status and OpenAI's error object.
    pub fn into_openai(self) -> Response {
        let (status, kind) = match &self {
            ServeError::Upstream { status, .. } => (
                StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_GATEWAY),
                "upstream_error",
            ),
            ServeError::Config(_) => (StatusCode::INTERNAL_SERVER_ERROR, "server_error"),
        };
        let message = self.to_string();
        (status, Json(ErrorBody::new(&message, kind))).into_response()
    }
}

/// OpenAI's error object: `{"error": {"message", "type", "param", "code"}}`. The Python and
/// JavaScript SDKs read `message` into the exception they raise and keep the rest as its body.
#[derive(Debug, Serialize)]
pub(crate) struct ErrorBody<'a> {
    error: ErrorDetail<'a>,
}

#[derive(Debug, Serialize)]
struct ErrorDetail<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    /// The request field at fault; `null` for failures that are no field's.
    param: Option<&'a str>,
    code: Option<&'a str>,
}

impl<'a> ErrorBody<'a> {
    /// An error object with this message and `type`, no `param` and no `code`.
    pub(crate) fn new(message: &'a str, kind: &'a str) -> Self {
        ErrorBody {
            error: ErrorDetail {
                message,
                kind,
                param: None,
                code: None,
            },
        }
    }
}
