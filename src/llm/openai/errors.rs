//! Error mapping: an HTTP status and body, or a transport failure, into a typed [`LlmError`]
//! that says what to do (check the key, the model name, the base URL, raise a timeout).

use std::time::Duration;

use serde_json::Value;

use crate::llm::LlmError;
use crate::text::clip_bytes;

pub(super) fn innermost_text(s: &str) -> String {
    s.trim_start_matches("EventStream error: ").to_owned()
}

/// Whether a 400 body complains about the `stop` parameter.
pub(super) fn names_stop(body: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    lower.contains("\"stop\"")
        || lower.contains("'stop'")
        || lower.contains("`stop`")
        || lower.contains(" stop ")
        || lower.contains("stop sequence")
        || lower.contains("stop parameter")
}

/// The message in an error body: `error.message`, `error` (string), `message`, `detail`, or the
/// raw text.
pub(super) fn error_message(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        let pick = |v: &Value| v.as_str().map(str::to_owned);
        if let Some(m) = v.get("error").and_then(|e| e.get("message")).and_then(pick) {
            return m;
        }
        for key in ["error", "message", "detail"] {
            if let Some(m) = v.get(key).and_then(pick) {
                return m;
            }
        }
    }
    clip_bytes(body.trim(), 300)
}

pub(super) fn classify_status(
    status: u16,
    retry_after: Option<Duration>,
    body: &str,
    url: &str,
    model: &str,
) -> LlmError {
    let message = error_message(body);
    let url = url.to_owned();
    match status {
        401 | 403 => LlmError::Unauthorized {
            status,
            url,
            message,
        },
        404 => LlmError::NotFound {
            model: model.to_owned(),
            url,
            message,
        },
        429 => LlmError::RateLimited {
            url,
            retry_after,
            message,
        },
        _ => LlmError::Http {
            status,
            url,
            message,
        },
    }
}

pub(super) fn reqwest_error(e: &reqwest::Error, url: &str, read_timeout: Duration) -> LlmError {
    let url = url.to_owned();
    if e.is_timeout() && !e.is_connect() {
        return LlmError::ReadTimeout {
            url,
            limit: read_timeout,
        };
    }
    let mut reason = e.to_string();
    let mut src: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = src {
        reason = s.to_string();
        src = s.source();
    }
    let lower = reason.to_ascii_lowercase();
    let reason = if lower.contains("refused") {
        "connection refused".to_owned()
    } else if e.is_timeout() {
        "connection timed out".to_owned()
    } else {
        reason
    };
    if e.is_connect() || e.is_request() {
        LlmError::Connect { url, reason }
    } else if e.is_body() || e.is_decode() {
        LlmError::StreamCut {
            url,
            received: 0,
            reason,
        }
    } else {
        LlmError::Connect { url, reason }
    }
}
