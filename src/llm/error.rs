//! Errors of the model layer.
//!
//! Every variant's message says what happened in words a user can act on, never includes an API
//! key, and keeps the HTTP status when there was one ([`LlmError::status`]).

use std::path::PathBuf;
use std::time::Duration;

use super::ContextOverflow;
use crate::secret::Redactor;

/// Everything that can go wrong while asking a model for a turn.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The client configuration is unusable (bad base URL, bad header, ...).
    #[error("invalid model configuration: {0}")]
    Config(String),

    /// The TCP/TLS connection could not be made.
    #[error("cannot connect to {url}: {reason} — is the server running?")]
    Connect {
        /// The base URL that was tried.
        url: String,
        /// What the OS or the HTTP library said, redacted. Text rather than the library's error
        /// as a `source`: that error's text can hold the URL, and with it a key.
        reason: String,
    },

    /// The server sent nothing for longer than the read timeout.
    #[error("the server at {url} sent nothing for {:.1}s (read timeout); it may be overloaded or still loading the model", limit.as_secs_f64())]
    ReadTimeout {
        /// The server's base URL (redacted like every string here).
        url: String,
        /// The client's `read_timeout`: the longest silence allowed between received bytes, not a
        /// limit on the whole answer.
        limit: Duration,
    },

    /// The whole turn took longer than its wall-clock limit.
    #[error("the model turn took longer than {:.1}s (turn timeout)", limit.as_secs_f64())]
    TurnTimeout {
        /// The client's `turn_timeout`, which covers the whole turn, retries included.
        limit: Duration,
    },

    /// 401 or 403.
    #[error(
        "the server at {url} answered {status} (not authorised): check the API key (--api-key or OPENAI_API_KEY){}",
        detail(message)
    )]
    Unauthorized {
        /// 401 or 403, as the server answered.
        status: u16,
        /// The server's base URL (redacted like every string here).
        url: String,
        /// The server's message (redacted: never contains our key).
        message: String,
    },

    /// 404 naming the model (or any 404: wrong model, or a base URL without `/v1`, said first).
    #[error("{}", not_found(model, url, message))]
    NotFound {
        /// The model name the client sent; every 404 lands here, so the base URL may be the
        /// cause instead.
        model: String,
        /// The server's base URL (redacted like every string here).
        url: String,
        /// The server's message.
        message: String,
    },

    /// 429 after all retries.
    #[error(
        "the server at {url} is rate limiting requests (429){}",
        detail(message)
    )]
    RateLimited {
        /// The server's base URL (redacted like every string here).
        url: String,
        /// How long the server asked us to wait, if it said.
        retry_after: Option<Duration>,
        /// The server's message.
        message: String,
    },

    /// Any other non-success HTTP status.
    #[error("the server at {url} answered {status}{}", detail(message))]
    Http {
        /// A redirect (3xx: none is followed, `message` says where to point `--base-url`) or an
        /// error status other than 401, 403, 404 and 429.
        status: u16,
        /// The server's base URL (redacted like every string here).
        url: String,
        /// The server's message (body or its `error.message`).
        message: String,
    },

    /// The server refused the prompt because it (with the turn's token budget) does not fit the
    /// model's context window: an HTTP 400 (or 413) saying so, or the same error inside a
    /// streamed answer. Never retried as it is: the caller must send less
    /// ([`LlmError::context_overflow`] gives the sizes the server named).
    #[error("{}", overflowed(url, overflow, message))]
    ContextOverflow {
        /// The HTTP status (400 or 413); `None` when the error came inside a 200 stream.
        status: Option<u16>,
        /// The server's base URL (redacted like every string here).
        url: String,
        /// What the server said of the sizes.
        overflow: ContextOverflow,
        /// The server's message (redacted).
        message: String,
    },

    /// The connection broke while the answer was streaming.
    #[error("the stream from {url} was cut after {received} bytes of text: {reason}")]
    StreamCut {
        /// The server's base URL (redacted like every string here).
        url: String,
        /// Text bytes received before the cut.
        received: usize,
        /// What the HTTP library said, redacted (text, for the same reason as `Connect`'s).
        reason: String,
    },

    /// The server sent something that is not the JSON we expect.
    #[error("the server at {url} sent a malformed response ({reason}): {snippet}")]
    Malformed {
        /// The server's base URL (redacted like every string here).
        url: String,
        /// What did not parse.
        reason: String,
        /// The start of the offending data.
        snippet: String,
    },

    /// The server answered without any choice.
    #[error("the server at {url} answered with no choices (no text at all)")]
    EmptyChoices {
        /// The server's base URL (redacted like every string here).
        url: String,
    },

    /// The server reported an error inside a successful (200) response or stream.
    #[error("the server at {url} reported an error: {message}")]
    Server {
        /// The server's base URL (redacted like every string here).
        url: String,
        /// The server's error text (redacted).
        message: String,
    },

    /// Retries were exhausted; the last failure is kept.
    #[error("{last} (gave up after {attempts} attempts)")]
    GaveUp {
        /// How many requests were made.
        attempts: u32,
        /// The error of the last attempt, which says what to fix.
        last: Box<LlmError>,
    },

    /// A script file could not be read.
    #[error("cannot read script {}: {source}", path.display())]
    ScriptIo {
        /// The script file's path.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },

    /// A script file is not in the expected format.
    #[error("script {name}, line {line}: {message}")]
    ScriptFormat {
        /// The script's name (its path, or `<inline>`).
        name: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },

    /// The scripted model was asked for more turns than the script has.
    #[error("the script {name} has only {turns} turns, and turn {asked} was asked for")]
    OutOfTurns {
        /// The script's name.
        name: String,
        /// Turns in the script.
        turns: usize,
        /// The 1-based turn that was asked for.
        asked: usize,
    },

    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// The message of [`LlmError::NotFound`]: first the missing `/v1` when no segment of the base
/// URL's path is an API version (`v1`, `v2`, `v1beta`); an empty model is the model list's 404.
fn not_found(model: &str, url: &str, message: &str) -> String {
    let version = |s: &str| s.starts_with('v') && s[1..].starts_with(|c: char| c.is_ascii_digit());
    let api =
        reqwest::Url::parse(url).map(|u| u.path_segments().is_none_or(|mut p| p.any(version)));
    let m = detail(message);
    match api {
        Ok(false) => format!(
            "the server answered 404 at {url}: most servers serve the OpenAI API under /v1 — try --base-url {url}/v1{m}"
        ),
        _ if model.is_empty() => format!("no model list at {url} (404): pass --model NAME{m}"),
        _ => format!(
            "the server answered 404 for model '{model}': check --model (and that --base-url {url} ends in /v1){m}"
        ),
    }
}

fn detail(message: &str) -> String {
    let m = message.trim();
    if m.is_empty() {
        String::new()
    } else {
        format!(": {}", crate::text::clip_bytes(m, 300))
    }
}

/// The message of [`LlmError::ContextOverflow`]: the sizes when the server named them, and what
/// the user can do about it.
fn overflowed(url: &str, overflow: &ContextOverflow, message: &str) -> String {
    let sizes = match (overflow.requested, overflow.window) {
        (Some(r), Some(w)) => format!(" ({r} tokens asked of a {w}-token window)"),
        (None, Some(w)) => format!(" (a {w}-token window)"),
        (Some(r), None) => format!(" ({r} tokens asked)"),
        (None, None) => String::new(),
    };
    format!(
        "the server at {url} refused the prompt: it does not fit the model's context window{sizes}; send less, or give the server a larger context{}",
        detail(message)
    )
}

impl LlmError {
    /// The same error with every secret `redactor` holds (and its derived forms) removed from
    /// every text it carries: the server's message, snippets, reasons, even the URL (which may
    /// hold a password). The model client applies it to each error it builds, so a server that
    /// echoes the key (`Incorrect API key provided: Bearer sk-…`) never gets it shown or stored.
    pub fn redacted(mut self, redactor: &Redactor) -> LlmError {
        if !redactor.is_empty() {
            for text in self.texts_mut() {
                *text = redactor.redact_string(std::mem::take(text));
            }
        }
        self
    }

    /// Every text the error carries (the last failure's, for [`LlmError::GaveUp`]).
    fn texts_mut(&mut self) -> Vec<&mut String> {
        match self {
            LlmError::Config(m) | LlmError::Other(m) => vec![m],
            LlmError::ReadTimeout { url, .. } | LlmError::EmptyChoices { url } => vec![url],
            LlmError::Connect { url, reason } | LlmError::StreamCut { url, reason, .. } => {
                vec![url, reason]
            }
            LlmError::Unauthorized { url, message, .. }
            | LlmError::RateLimited { url, message, .. }
            | LlmError::Http { url, message, .. }
            | LlmError::Server { url, message }
            | LlmError::ContextOverflow { url, message, .. } => vec![url, message],
            LlmError::NotFound {
                model,
                url,
                message,
            } => vec![model, url, message],
            LlmError::Malformed {
                url,
                reason,
                snippet,
            } => vec![url, reason, snippet],
            LlmError::GaveUp { last, .. } => last.texts_mut(),
            LlmError::TurnTimeout { .. }
            | LlmError::ScriptIo { .. }
            | LlmError::ScriptFormat { .. }
            | LlmError::OutOfTurns { .. } => Vec::new(),
        }
    }

    /// The HTTP status this error came with, if any.
    pub fn status(&self) -> Option<u16> {
        match self {
            LlmError::Unauthorized { status, .. } | LlmError::Http { status, .. } => Some(*status),
            LlmError::ContextOverflow { status, .. } => *status,
            LlmError::NotFound { .. } => Some(404),
            LlmError::RateLimited { .. } => Some(429),
            LlmError::GaveUp { last, .. } => last.status(),
            _ => None,
        }
    }

    /// Whether asking again could help: connection errors, read timeouts, 408, 429 and 5xx.
    /// Other 4xx, malformed answers and script errors are permanent.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Connect { .. }
            | LlmError::ReadTimeout { .. }
            | LlmError::RateLimited { .. } => true,
            LlmError::Http { status, .. } => *status == 408 || *status >= 500,
            _ => false,
        }
    }

    /// When the server refused the request because the prompt (plus the turn's token budget)
    /// does not fit its context window, what it said of the sizes; `None` for every other error.
    /// The OpenAI client reports such a refusal as [`LlmError::ContextOverflow`] (read from the
    /// answer's JSON fields when it has them); an [`LlmError::Http`] 400/413 or an in-band
    /// [`LlmError::Server`] error whose text says the same (another client's) is read from its
    /// words. The agent loop fits the history harder and asks once more on this error.
    pub fn context_overflow(&self) -> Option<ContextOverflow> {
        match self {
            LlmError::ContextOverflow { overflow, .. } => Some(*overflow),
            LlmError::Http {
                status: 400 | 413,
                message,
                ..
            } => ContextOverflow::from_text(message),
            LlmError::Server { message, .. } => ContextOverflow::from_text(message),
            LlmError::GaveUp { last, .. } => last.context_overflow(),
            _ => None,
        }
    }

    /// The `Retry-After` the server asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::RateLimited { retry_after, .. } => *retry_after,
            LlmError::GaveUp { last, .. } => last.retry_after(),
            _ => None,
        }
    }
}
