//! What can go wrong while answering a request, and how each failure reaches the client: as
//! OpenAI's error object, `{"error": {"message", "type", "param", "code"}}`, with the HTTP
//! status an OpenAI client expects for it (the SDKs read `type`, `param` and the status, and
//! retry 429 and 5xx on their own).

use axum::http::StatusCode;
use axum::http::header::{HeaderValue, RETRY_AFTER};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// A failure of the endpoint. The message of every variant is safe to show a client: it never
/// holds a key (upstream errors are redacted before they are wrapped here).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The request is malformed or asks for something the endpoint cannot do: HTTP 400,
    /// `invalid_request_error`, `param` naming the field (`messages[2].tool_call_id`).
    #[error("{message}")]
    BadRequest {
        /// What is wrong, for the client's developer.
        message: String,
        /// The field at fault, in OpenAI's dotted/indexed form, when there is one.
        param: Option<String>,
    },
    /// The conversation does not fit the upstream model's context window even after fitting
    /// (long tool results cut, old turns summarised, the turn budget at its floor), or the
    /// upstream refused it as too long twice: HTTP 400, `invalid_request_error`, `param`
    /// `messages`, `code` `context_length_exceeded` (as OpenAI answers it).
    #[error("{message}")]
    ContextLength {
        /// What did not fit, in tokens where they are known.
        message: String,
    },
    /// The proxy's own key is missing or wrong: HTTP 401.
    #[error("missing or incorrect API key for this endpoint")]
    Unauthorized,
    /// The body is larger than the configured limit: HTTP 413.
    #[error("the request body is larger than {limit} bytes")]
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// Every request slot is taken: HTTP 429 with `Retry-After: 1` (clients retry).
    #[error("the server is busy ({limit} requests in flight); retry shortly")]
    Busy {
        /// How many requests may run at once.
        limit: usize,
    },
    /// The client did not send the whole body within the body time limit: HTTP 408 (the
    /// request is not answered, the connection closed).
    #[error("the request body did not arrive within {secs} s")]
    SlowBody {
        /// The limit, in seconds.
        secs: u64,
    },
    /// The request took longer than the configured time limit: HTTP 504.
    #[error("the request took longer than {secs} s")]
    Timeout {
        /// The limit, in seconds.
        secs: u64,
    },
    /// The upstream failed (unreachable, an HTTP error after retries) or never produced a turn
    /// that could be used within the repair budget: HTTP 502, `upstream_error`.
    #[error("{reason}")]
    Upstream {
        /// Why, already redacted.
        reason: String,
    },
    /// The endpoint could not be set up (a bad upstream URL, a prompt template that does not
    /// render): HTTP 500 if it ever reaches a client.
    #[error("{0}")]
    Config(String),
    /// A request passed through to the upstream (no tools) got nothing that can be relayed: the
    /// upstream could not be reached, answered with a redirect (never followed), sent more than
    /// the proxy reads, or took too long. `status` is what the client gets (502, or 504 for a
    /// time limit); `message` names no address or key of the upstream.
    #[error("{message}")]
    Relay {
        /// The HTTP status the client gets.
        status: u16,
        /// What happened, in words a client may read.
        message: String,
    },
}

impl ServeError {
    /// The 504 of an upstream request the model client's own time limit ended. In serve that
    /// limit is the request's (`--timeout`, `clients.rs`), so the request is over: the client
    /// gets the 504 the request's deadline would give a moment later, not a 502.
    pub(crate) fn out_of_time(e: &crate::llm::LlmError) -> Option<ServeError> {
        use crate::llm::LlmError;
        match e {
            LlmError::GaveUp { last, .. } => ServeError::out_of_time(last),
            LlmError::TurnTimeout { limit } | LlmError::ReadTimeout { limit, .. } => {
                Some(ServeError::Timeout {
                    secs: limit.as_secs(),
                })
            }
            _ => None,
        }
    }

    /// A 400 naming the field at fault.
    pub fn bad_request(message: impl Into<String>, param: impl Into<String>) -> Self {
        ServeError::BadRequest {
            message: message.into(),
            param: Some(param.into()),
        }
    }

    /// The HTTP status this failure is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            ServeError::BadRequest { .. } | ServeError::ContextLength { .. } => {
                StatusCode::BAD_REQUEST
            }
            ServeError::Unauthorized => StatusCode::UNAUTHORIZED,
            ServeError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ServeError::Busy { .. } => StatusCode::TOO_MANY_REQUESTS,
            ServeError::SlowBody { .. } => StatusCode::REQUEST_TIMEOUT,
            ServeError::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            ServeError::Upstream { .. } => StatusCode::BAD_GATEWAY,
            ServeError::Config(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ServeError::Relay { status, .. } => {
                StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_GATEWAY)
            }
        }
    }

    /// OpenAI's `type` (and `code`) for this failure.
    fn kind(&self) -> (&'static str, Option<&'static str>) {
        match self {
            ServeError::BadRequest { .. } => ("invalid_request_error", None),
            ServeError::ContextLength { .. } => {
                ("invalid_request_error", Some("context_length_exceeded"))
            }
            ServeError::Unauthorized => ("invalid_request_error", Some("invalid_api_key")),
            ServeError::TooLarge { .. } => ("invalid_request_error", Some("request_too_large")),
            ServeError::Busy { .. } => ("rate_limit_error", Some("rate_limit_exceeded")),
            ServeError::SlowBody { .. } => ("invalid_request_error", Some("request_timeout")),
            ServeError::Timeout { .. } => ("timeout_error", Some("timeout")),
            ServeError::Upstream { .. } => ("upstream_error", None),
            ServeError::Config(_) => ("server_error", None),
            ServeError::Relay { .. } => ("upstream_error", None),
        }
    }

    /// The response a client gets: the status and OpenAI's error object.
    pub fn into_openai(self) -> Response {
        let (kind, code) = self.kind();
        let param = match &self {
            ServeError::BadRequest { param, .. } => param.clone(),
            ServeError::ContextLength { .. } => Some("messages".into()),
            _ => None,
        };
        let body = json!({"error": {
            "message": self.to_string(),
            "type": kind,
            "param": param,
            "code": code,
        }});
        self.respond(body)
    }

    /// The response of this failure with a face's error `body`: its status, and `Retry-After`
    /// when the server is busy (every face's clients retry on it).
    pub(crate) fn respond(&self, body: serde_json::Value) -> Response {
        let mut response = (self.status(), axum::Json(body)).into_response();
        if matches!(self, ServeError::Busy { .. }) {
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

/// OpenAI's error object, `{"error": {"message", "type", "param": null, "code": null}}`, for
/// failures that are no field's: a relayed upstream failure, a stream broken off mid-way. The
/// Python and JavaScript SDKs read `message` into the exception they raise.
#[derive(Debug, serde::Serialize)]
pub(crate) struct ErrorBody<'a> {
    error: ErrorDetail<'a>,
}

#[derive(Debug, serde::Serialize)]
struct ErrorDetail<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
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

impl IntoResponse for ServeError {
    fn into_response(self) -> Response {
        self.into_openai()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(e: ServeError) -> (StatusCode, serde_json::Value) {
        let r = e.into_openai();
        let status = r.status();
        let bytes = axum::body::to_bytes(r.into_body(), 1 << 16).await.unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn a_bad_request_names_its_field() {
        let (status, v) = body(ServeError::bad_request("no such tool", "tool_choice")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert_eq!(v["error"]["param"], "tool_choice");
        assert_eq!(v["error"]["message"], "no such tool");
    }

    #[tokio::test]
    async fn a_conversation_too_long_is_openais_context_length_error() {
        let e = ServeError::ContextLength {
            message: "too long".into(),
        };
        let (status, v) = body(e).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert_eq!(v["error"]["code"], "context_length_exceeded");
        assert_eq!(v["error"]["param"], "messages");
    }

    #[tokio::test]
    async fn an_unusable_upstream_is_a_502_upstream_error() {
        let e = ServeError::Upstream {
            reason: "bad".into(),
        };
        let (status, v) = body(e).await;
        assert_eq!(status, StatusCode::BAD_GATEWAY);
        assert_eq!(v["error"]["type"], "upstream_error");
        assert!(v["error"]["param"].is_null());
    }
}
