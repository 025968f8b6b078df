//! The one place where what the HTTP client met becomes a typed [`LlmError`] that says what to
//! do (check the key, the model name, the base URL, raise a timeout): an HTTP status and body, a
//! redirect, a transport failure, or a body over its cap. Every error
//! leaves here redacted: the key a server echoes is never shown or stored.

use std::time::Duration;

use serde_json::Value;

use super::OpenAiModel;
use super::attempt_error::AttemptError;
use super::grammar::names_grammar;
use crate::llm::{ContextOverflow, LlmError};
use crate::text::clip_bytes;
use crate::upstream::{Fault, HttpFailure};

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

/// Whether a 400 body refuses streaming (`stream: true`): a gateway or a proxy that only
/// answers whole.
pub(super) fn names_stream(body: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    [
        "\"stream\"",
        "'stream'",
        "`stream`",
        "streaming",
        "stream is not",
        "stream not",
    ]
    .iter()
    .any(|w| lower.contains(w))
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

/// A non-2xx status as our error. A 3xx says where the server points: tagloop follows no
/// redirect (the key would go along to wherever it points), so the user fixes the base URL.
pub(super) fn classify_status(
    status: u16,
    retry_after: Option<Duration>,
    location: Option<&str>,
    body: &str,
    url: &str,
    model: &str,
) -> LlmError {
    let url = url.to_owned();
    if (300..400).contains(&status) {
        let message = match location {
            Some(to) => format!(
                "it redirects to {to}: use that URL as --base-url (tagloop follows no redirect, so the key never goes where you did not send it)"
            ),
            None => "it redirects elsewhere without saying where: check --base-url".to_owned(),
        };
        return LlmError::Http {
            status,
            url,
            message,
        };
    }
    let message = error_message(body);
    if matches!(status, 400 | 413)
        && let Some(overflow) = ContextOverflow::from_body(body)
    {
        return LlmError::ContextOverflow {
            status: Some(status),
            url,
            overflow,
            message,
        };
    }
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

/// A transport failure: a read timeout, a refused or failed connection, a body cut short.
/// `received`: text bytes already taken in, for a cut stream.
pub(super) fn reqwest_error(
    e: &reqwest::Error,
    url: &str,
    read_timeout: Duration,
    received: usize,
) -> LlmError {
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
    if !(e.is_connect() || e.is_request()) && (e.is_body() || e.is_decode()) {
        LlmError::StreamCut {
            url,
            received,
            reason,
        }
    } else {
        LlmError::Connect { url, reason }
    }
}

/// Whether a request failed because its connection closed before any answer came: a kept
/// connection the server closed just as the request went out (its keep-alive ran out, or it
/// closes after every answer without saying so). A refused connection or a timeout is not one.
pub(super) fn closed_before_answer(e: &reqwest::Error) -> bool {
    if e.is_connect() || e.is_timeout() || e.is_status() {
        return false;
    }
    let mut src: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::UnexpectedEof
            )
        {
            return true;
        }
        // hyper's own words for it (`hyper::Error::is_incomplete_message`).
        if s.to_string()
            .contains("connection closed before message completed")
        {
            return true;
        }
        src = s.source();
    }
    false
}

impl OpenAiModel {
    /// Anything the transport met, as our error. `received`: text bytes of the turn taken in
    /// before it (a stream cut midway says how far it got).
    pub(super) fn fault(&self, fault: Fault, received: usize) -> AttemptError {
        let url = &self.base_url;
        let err = match fault {
            Fault::Status(f) => return self.failure(f),
            Fault::Io(e) => reqwest_error(&e, url, self.cfg.read_timeout, received),
            Fault::TooLarge { .. } => LlmError::Malformed {
                url: url.clone(),
                reason: fault.to_string(),
                snippet: String::new(),
            },
        };
        AttemptError::from(err.redacted(&self.redactor))
    }

    /// A non-2xx answer as our error, keeping the status (and whether a 400 named `stop` or the
    /// grammar field).
    fn failure(&self, f: HttpFailure) -> AttemptError {
        // The body is the server's text: the key it may echo goes before anything is built
        // from it.
        let body = self.redactor.redact(&f.body);
        let err = classify_status(
            f.status,
            f.retry_after,
            f.location.as_deref(),
            &body,
            &self.base_url,
            &self.cfg.model,
        );
        // A prompt too long for the window is never "the server refused `stop`" (or the
        // grammar), whatever words its message uses: asking again without them would only send
        // the same prompt twice.
        let refused_field = f.status == 400 && err.context_overflow().is_none();
        AttemptError {
            err: err.redacted(&self.redactor),
            emitted: false,
            stop_rejected: refused_field && names_stop(&body),
            grammar_rejected: refused_field && names_grammar(&body),
            stream_rejected: refused_field && names_stream(&body),
            closed_early: false,
        }
    }
}
