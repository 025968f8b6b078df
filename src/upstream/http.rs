//! The edge of the one HTTP client: every body tagloop reads from a model server (the model
//! client's and the serve proxy's) is read here, up to a cap, and every answer that is not a
//! success becomes a [`Fault`] for the model client's one error mapper (`llm/openai/errors.rs`).
//!
//! * **Every non-2xx answer is read here** ([`read_failure`]), keeping its HTTP status,
//!   `Retry-After` and `Location` whatever its body's shape (Ollama's `{"error":"…"}`,
//!   llama.cpp's integer `code`, HTML from a proxy).
//! * **Caps**: 1 MiB for error bodies and probe answers, 16 MiB for a whole answer (hundreds of
//!   times a long turn's JSON). A body over its cap is dropped unread, which closes the
//!   connection; an error body keeps its first MiB (the message is at the start).

use std::time::Duration;

use crate::text::{byte_size, clip_bytes};

/// The part of an error answer's body that is read and kept.
const MAX_ERROR_BODY: usize = 1 << 20;

/// The largest answer to a server probe (`/props`, `/v1/models`) that is read.
pub(super) const MAX_PROBE_BODY: usize = 1 << 20;

/// Longest a detection probe may take.
pub(super) const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest whole (non-streamed) answer that is read.
pub const MAX_ANSWER_BODY: usize = 16 << 20;

/// How long a kept connection to a model server may sit idle in the pool before it is closed.
/// Servers close theirs sooner or later (uvicorn, under vLLM, and llama-server after 5 s; nginx
/// after 75 s): a connection they closed is dropped from the pool when the close arrives.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The interval of TCP keep-alive probes on connections to a model server: a long turn's silent
/// connection (a server reading a long prompt sends nothing for minutes) is not taken for dead
/// by a NAT or a firewall on the way, and a peer that vanished is found.
pub const TCP_KEEPALIVE: Duration = Duration::from_secs(30);

/// The connection pool of a client to a model server (the model client's, serve's
/// pass-through): connections kept between requests (no TCP and TLS handshake per turn), at most
/// `idle_per_host` idle ones per server (serve keeps one per request it answers at once), idle
/// ones closed after [`POOL_IDLE_TIMEOUT`]; no Nagle delay on small requests, and TCP keep-alive
/// probes every [`TCP_KEEPALIVE`].
pub fn pooled(builder: reqwest::ClientBuilder, idle_per_host: usize) -> reqwest::ClientBuilder {
    builder
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .pool_max_idle_per_host(idle_per_host.max(1))
        .tcp_nodelay(true)
        .tcp_keepalive(TCP_KEEPALIVE)
}

/// A non-2xx HTTP answer: its status and what the error mapper reads of it.
#[derive(Debug)]
pub struct HttpFailure {
    pub status: u16,
    pub retry_after: Option<Duration>,
    /// Where a 3xx points, resolved against the request's URL.
    pub location: Option<String>,
    /// The start of the body (at most [`MAX_ERROR_BODY`]).
    pub body: String,
}

/// What went wrong below the model client, in the kinds the error mapper tells apart.
#[derive(Debug)]
pub enum Fault {
    /// The server answered, but not with a success (redirects included: none is followed).
    Status(HttpFailure),
    /// Connecting, sending or reading failed (timeouts included).
    Io(reqwest::Error),
    /// A body, or one server-sent event, went past its cap.
    TooLarge {
        /// What was too large, for the message ("the answer").
        what: &'static str,
        /// The cap in bytes.
        limit: usize,
    },
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Status(h) => write!(f, "HTTP {}: {}", h.status, clip_bytes(&h.body, 200)),
            Fault::Io(e) => write!(f, "{e}"),
            Fault::TooLarge { what, limit } => {
                write!(f, "{what} is larger than {}", byte_size(*limit))
            }
        }
    }
}

impl std::error::Error for Fault {}

/// Read a body until its end or until `limit` bytes: the bytes, and whether the end was reached.
/// Stopping early drops the response, which closes its connection. The one capped reader: the
/// model client's and the serve proxy's upstream bodies are both read here.
pub async fn read_up_to(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let hint = response.content_length().unwrap_or(0).min(limit as u64) as usize;
    let mut out = Vec::with_capacity(hint);
    while let Some(chunk) = response.chunk().await? {
        let room = limit - out.len();
        if chunk.len() > room {
            out.extend_from_slice(&chunk[..room]);
            return Ok((out, false));
        }
        out.extend_from_slice(&chunk);
    }
    Ok((out, true))
}

/// A whole body of at most `limit` bytes, or [`Fault::TooLarge`] naming `what`.
pub async fn read_capped(
    response: reqwest::Response,
    limit: usize,
    what: &'static str,
) -> Result<Vec<u8>, Fault> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(Fault::TooLarge { what, limit });
    }
    match read_up_to(response, limit).await.map_err(Fault::Io)? {
        (body, true) => Ok(body),
        (_, false) => Err(Fault::TooLarge { what, limit }),
    }
}

/// Read a non-2xx answer: its status, `Retry-After` (seconds), `Location`, and the start of
/// its body (a body that breaks off keeps what arrived).
pub async fn read_failure(response: reqwest::Response) -> HttpFailure {
    let status = response.status();
    let header = |name| response.headers().get(name).and_then(|v| v.to_str().ok());
    let retry_after = header(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.trim().parse::<f64>().ok())
        // A value too large for a `Duration` (a server may send anything) is ignored.
        .and_then(|s| Duration::try_from_secs_f64(s).ok());
    let location = header(reqwest::header::LOCATION).map(|to| {
        response
            .url()
            .join(to)
            .map_or_else(|_| to.to_owned(), String::from)
    });
    let body = match read_up_to(response, MAX_ERROR_BODY).await {
        Ok((bytes, _)) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => String::new(),
    };
    HttpFailure {
        status: status.as_u16(),
        retry_after,
        location,
        body,
    }
}
