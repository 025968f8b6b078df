//! The pass-through: requests the endpoint has nothing to add to (no `tools`, no
//! `response_format`), `/completions`, and the model list, relayed to the upstream server.
//!
//! What is relayed and what is not:
//!
//! * **The request body goes unchanged**; none of the client's headers do. The upstream gets
//!   `Content-Type: application/json` and the upstream key as a bearer token (none when the
//!   key is empty): the client's `Authorization`, which holds the proxy's own key, never
//!   leaves the proxy.
//! * **A streamed answer** (a 2xx with `text/event-stream`) is passed on chunk by chunk as it
//!   arrives, nothing kept; within the total time limit and the idle limit. The upstream key
//!   and its cheap encodings are replaced by `[redacted]` there too: bytes that may begin one
//!   are held back until the next chunk shows whether they do (`secret/stream.rs`). When either runs
//!   out, or the upstream breaks off, the client gets OpenAI's error event and `[DONE]` if the
//!   relayed bytes end between two events, else the connection is cut (half an event followed
//!   by anything would be misread).
//! * **A whole answer** (anything else) is read up to its cap (16 MiB for a success, like the
//!   model client; the first MiB of a failure) and relayed with its status and content type,
//!   the upstream key and its cheap encodings replaced by `[redacted]` (some servers echo the
//!   key they were sent in an error message), searched as bytes so that an answer that is not
//!   UTF-8 is no exception. An answer over the cap is refused with 502 and
//!   the upstream connection dropped unread.
//! * **A redirect is never followed** (it would carry the upstream key to wherever it points)
//!   nor relayed (the client would carry the proxy's key there): the client gets 502.
//! * **An upstream that cannot be reached** gives 502; one that does not answer in time, 504.
//!   The message names neither the upstream's address nor the cause; the log has both.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::time::{Instant, timeout_at};

use super::error::{ErrorBody, ServeError};
use crate::llm::openai::normalize_base_url;
use crate::secret::{ByteStreamRedactor, Redactor, Secret};
use crate::shown::Outside;
use crate::text::byte_size;
use crate::upstream::{pooled, read_up_to};

/// Time and size limits of the pass-through.
#[derive(Debug, Clone)]
pub struct UpstreamLimits {
    /// Limit for establishing a connection to the upstream (default 10 s).
    pub connect: Duration,
    /// Limit for silence between bytes of an answer, headers included (default 120 s).
    pub idle: Duration,
    /// Wall-clock limit for one relayed request, from sending it to the last byte of the
    /// answer, streamed or whole (default 600 s, the model client's turn limit).
    pub total: Duration,
    /// The largest whole successful answer that is read (default 16 MiB).
    pub max_answer: usize,
    /// The part of a failed answer (non-2xx) that is read and relayed (default 1 MiB).
    pub max_error: usize,
    /// The largest model list (`GET /models`) that is read and parsed (default 1 MiB, as the
    /// model client's probes): a larger one is refused with 502.
    pub max_models: usize,
    /// Idle connections kept to the upstream for the next request (default 16; serve sets its
    /// concurrency): see `crate::upstream::pooled`.
    pub pool_idle_per_host: usize,
}

impl Default for UpstreamLimits {
    fn default() -> Self {
        UpstreamLimits {
            connect: Duration::from_secs(10),
            idle: Duration::from_secs(120),
            total: Duration::from_secs(600),
            max_answer: 16 << 20,
            max_error: 1 << 20,
            max_models: 1 << 20,
            pool_idle_per_host: 16,
        }
    }
}

/// The upstream server as the pass-through sees it: one HTTP client (redirects never
/// followed), the base URL, the key, and the configured model name. Cheap to clone.
#[derive(Clone)]
pub struct Upstream {
    http: reqwest::Client,
    /// Normalised: no trailing `/` (e.g. `http://127.0.0.1:8080/v1`).
    base_url: String,
    /// `Bearer <key>`, marked sensitive; `None` for an empty key.
    auth: Option<HeaderValue>,
    /// The `--model` name: the model list's fallback.
    model: Option<String>,
    /// Removes the upstream key from relayed whole answers.
    redactor: Redactor,
    limits: UpstreamLimits,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// The upstream at `base_url` (e.g. `http://127.0.0.1:8080/v1`; a pasted
    /// `/chat/completions` is removed) with the default [`UpstreamLimits`]. No request is made.
    ///
    /// Fails with [`ServeError::Config`] when the URL is not an `http(s)` URL or the key holds
    /// characters a header cannot carry.
    pub fn new(
        base_url: &str,
        api_key: Secret,
        model: Option<String>,
    ) -> Result<Upstream, ServeError> {
        Upstream::with_limits(base_url, api_key, model, UpstreamLimits::default())
    }

    /// [`Upstream::new`] with these limits.
    pub fn with_limits(
        base_url: &str,
        api_key: Secret,
        model: Option<String>,
        limits: UpstreamLimits,
    ) -> Result<Upstream, ServeError> {
        let base_url =
            normalize_base_url(base_url).map_err(|e| ServeError::Config(e.to_string()))?;
        let http = pooled(reqwest::Client::builder(), limits.pool_idle_per_host)
            .connect_timeout(limits.connect)
            .read_timeout(limits.idle)
            // Following a redirect would send the upstream key wherever the upstream points.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ServeError::Config(format!("cannot build the HTTP client: {e}")))?;
        let auth = if api_key.is_empty() {
            None
        } else {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", api_key.expose()))
                .map_err(|_| {
                    ServeError::Config(
                        "the upstream key holds characters a header cannot carry".into(),
                    )
                })?;
            value.set_sensitive(true);
            Some(value)
        };
        Ok(Upstream {
            http,
            base_url,
            auth,
            model,
            redactor: Redactor::with([api_key.expose()]),
            limits,
        })
    }

    /// The redactor of the upstream key and its cheap forms (for the core's answers too).
    pub(crate) fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// What the pass-through of other routes (`passthrough/`) sends with: this HTTP client
    /// (its connections, limits and redirect policy), the base URL and the upstream key's header.
    pub(crate) fn parts(&self) -> (&reqwest::Client, &str, Option<&HeaderValue>) {
        (&self.http, &self.base_url, self.auth.as_ref())
    }

    /// Relay a `POST /v1/chat/completions` body to `{base}/chat/completions` unchanged, and
    /// its answer back (see the module docs for what is relayed, capped and refused).
    pub async fn pass_through(&self, body: Bytes) -> Response {
        self.relay("chat/completions", body, None).await
    }

    /// Relay a `POST /v1/completions` body to `{base}/completions`, as
    /// [`Upstream::pass_through`] does.
    pub async fn pass_through_completions(&self, body: Bytes) -> Response {
        self.relay("completions", body, None).await
    }

    /// [`Upstream::pass_through`] (`completions`: of a `/completions` body) ending by
    /// `deadline` at the latest, a streamed answer included: the request's own time limit.
    pub async fn pass_through_until(
        &self,
        completions: bool,
        body: Bytes,
        deadline: Instant,
    ) -> Response {
        let path = if completions {
            "completions"
        } else {
            "chat/completions"
        };
        self.relay(path, body, Some(deadline)).await
    }

    /// Answer `GET /v1/models`: the upstream's list when it has one (a 2xx JSON object with a
    /// `data` array), else a list of the configured model alone, else what the upstream said
    /// (its failure relayed, or 502/504 when it could not be asked).
    pub async fn models(&self) -> Response {
        let deadline = Instant::now() + self.limits.total;
        let mut request = self.http.get(format!("{}/models", self.base_url));
        if let Some(auth) = &self.auth {
            request = request.header(header::AUTHORIZATION, auth.clone());
        }
        let answer = match timeout_at(deadline, request.send()).await {
            Ok(Ok(response)) => {
                self.read_whole_within(response, deadline, self.limits.max_models)
                    .await
            }
            Ok(Err(e)) => Err(unreachable(&e)),
            Err(_) => Err(too_slow(self.limits.total)),
        };
        if let Ok(whole) = &answer
            && whole.status.is_success()
            && is_model_list(&whole.body)
        {
            return whole.response();
        }
        if let Some(model) = &self.model {
            let list = serde_json::json!({"object": "list", "data": [
                {"id": model, "object": "model", "created": 0, "owned_by": "tagloop"}
            ]});
            return (StatusCode::OK, axum::Json(list)).into_response();
        }
        match answer {
            Ok(whole) => whole.response(),
            Err(e) => e.into_openai(),
        }
    }

    async fn relay(&self, path: &str, body: Bytes, until: Option<Instant>) -> Response {
        let total = Instant::now() + self.limits.total;
        let deadline = until.map_or(total, |until| until.min(total));
        let mut request = self
            .http
            .post(format!("{}/{path}", self.base_url))
            .header(header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(auth) = &self.auth {
            request = request.header(header::AUTHORIZATION, auth.clone());
        }
        let response = match timeout_at(deadline, request.send()).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => return unreachable(&e).into_openai(),
            Err(_) => return too_slow(self.limits.total).into_openai(),
        };
        let streamed = response.status().is_success()
            && response
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        if streamed {
            return self.relay_stream(response, deadline);
        }
        match self.read_whole(response, deadline).await {
            Ok(whole) => whole.response(),
            Err(e) => e.into_openai(),
        }
    }

    /// Pass a streamed answer on as it arrives, within `deadline`.
    fn relay_stream(&self, response: reqwest::Response, deadline: Instant) -> Response {
        let status = response.status();
        let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
        let relay = Relay {
            body: response.bytes_stream().boxed(),
            deadline,
            tail: Vec::new(),
            redact: ByteStreamRedactor::new(self.redactor.clone()),
            done: false,
        };
        // Each step gives the pieces to send (none while the redactor holds a piece back).
        let chunks = futures::stream::unfold(relay, |mut relay| async move {
            if relay.done {
                return None;
            }
            let failure = match timeout_at(relay.deadline, relay.body.next()).await {
                Ok(Some(Ok(bytes))) => {
                    let safe = relay.redact.push(&bytes);
                    return Some((relay.pass_on(safe).into_iter().collect(), relay));
                }
                Ok(None) => {
                    relay.done = true;
                    let rest = relay.redact.finish();
                    return Some((relay.pass_on(rest).into_iter().collect(), relay));
                }
                Ok(Some(Err(e))) => {
                    tracing::warn!(error = %Outside(&e), "the upstream's stream broke off");
                    "the upstream's stream broke off"
                }
                Err(_) => {
                    tracing::warn!("the upstream's stream ran past the time limit");
                    "the upstream's stream ran past the time limit"
                }
            };
            relay.done = true;
            let rest = relay.redact.finish();
            let mut pieces: Vec<_> = relay.pass_on(rest).into_iter().collect();
            pieces.push(relay.failure_end(failure));
            Some((pieces, relay))
        })
        .flat_map(futures::stream::iter);
        let mut builder = Response::builder()
            .status(status)
            .header(header::CACHE_CONTROL, "no-cache");
        if let Some(ct) = content_type {
            builder = builder.header(header::CONTENT_TYPE, ct);
        }
        builder
            .body(Body::from_stream(chunks))
            .unwrap_or_else(|_| internal())
    }

    /// Read a whole answer within its cap and `deadline`; redirects become errors.
    async fn read_whole(
        &self,
        response: reqwest::Response,
        deadline: Instant,
    ) -> Result<Whole, ServeError> {
        self.read_whole_within(response, deadline, self.limits.max_answer)
            .await
    }

    /// [`Upstream::read_whole`] with `max_success` as the cap of a successful answer.
    async fn read_whole_within(
        &self,
        response: reqwest::Response,
        deadline: Instant,
        max_success: usize,
    ) -> Result<Whole, ServeError> {
        let status = response.status();
        if status.is_redirection() {
            let to = response
                .headers()
                .get(header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            tracing::warn!(status = status.as_u16(), location = %Outside(self.redactor.redact(to)), "the upstream answered with a redirect, not followed");
            return Err(ServeError::Relay {
                status: 502,
                message: format!(
                    "the upstream answered HTTP {} (a redirect), which the proxy does not follow",
                    status.as_u16()
                ),
            });
        }
        let success = status.is_success();
        let cap = if success {
            max_success
        } else {
            self.limits.max_error
        };
        let too_large = || ServeError::Relay {
            status: 502,
            message: format!("the upstream's answer is larger than {}", byte_size(cap)),
        };
        if success && response.content_length().is_some_and(|n| n > cap as u64) {
            return Err(too_large());
        }
        let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
        let (body, complete) = match timeout_at(deadline, read_up_to(response, cap)).await {
            Ok(Ok(read)) => read,
            Ok(Err(e)) => return Err(unreachable(&e)),
            Err(_) => return Err(too_slow(self.limits.total)),
        };
        // Past the cap, an answer is refused (the response was dropped unread, which closes the
        // connection); a failure keeps its start: the message is there.
        if success && !complete {
            return Err(too_large());
        }
        // Searched as bytes: an answer that is not UTF-8 (a Latin-1 page) is redacted too.
        let body = match self.redactor.redact_bytes(&body) {
            std::borrow::Cow::Borrowed(_) => Bytes::from(body),
            std::borrow::Cow::Owned(redacted) => Bytes::from(redacted),
        };
        Ok(Whole {
            status,
            content_type,
            body,
        })
    }
}

/// A whole answer read from the upstream.
struct Whole {
    status: StatusCode,
    content_type: Option<HeaderValue>,
    body: Bytes,
}

impl Whole {
    fn response(&self) -> Response {
        let mut builder = Response::builder().status(self.status);
        if let Some(ct) = &self.content_type {
            builder = builder.header(header::CONTENT_TYPE, ct);
        }
        builder
            .body(Body::from(self.body.clone()))
            .unwrap_or_else(|_| internal())
    }
}

/// A streamed answer being relayed.
struct Relay {
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    deadline: Instant,
    /// The last few bytes passed on: whether they end an event.
    tail: Vec<u8>,
    /// Takes the upstream key out, holding back what may be the start of one.
    redact: ByteStreamRedactor,
    done: bool,
}

impl Relay {
    /// `bytes` as the next piece to send (none when empty), remembering how they end.
    fn pass_on(&mut self, bytes: Vec<u8>) -> Option<Result<Bytes, std::io::Error>> {
        if bytes.is_empty() {
            return None;
        }
        self.remember_tail(&bytes);
        Some(Ok(Bytes::from(bytes)))
    }

    fn remember_tail(&mut self, bytes: &[u8]) {
        self.tail
            .extend_from_slice(&bytes[bytes.len().saturating_sub(4)..]);
        let excess = self.tail.len().saturating_sub(4);
        self.tail.drain(..excess);
    }

    /// How a broken-off stream ends: OpenAI's error event and `[DONE]` when the bytes so far
    /// end between events (or none were sent), else an error that cuts the connection.
    fn failure_end(&self, message: &str) -> Result<Bytes, std::io::Error> {
        let between = self.tail.is_empty()
            || self.tail.ends_with(b"\n\n")
            || self.tail.ends_with(b"\r\r")
            || self.tail.ends_with(b"\r\n\r\n");
        if !between {
            return Err(std::io::Error::other(message.to_owned()));
        }
        let error = serde_json::to_string(&ErrorBody::new(message, "upstream_error"))
            .map_err(std::io::Error::other)?;
        Ok(Bytes::from(format!("data: {error}\n\ndata: [DONE]\n\n")))
    }
}

/// Whether a body is a JSON object with a `data` array (OpenAI's list).
fn is_model_list(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .is_ok_and(|v| v.get("data").is_some_and(serde_json::Value::is_array))
}

/// A request that failed below HTTP (connecting, sending, reading, an idle limit).
fn unreachable(e: &reqwest::Error) -> ServeError {
    tracing::warn!(error = %Outside(e), "the upstream could not be reached");
    let (status, message) = if e.is_timeout() {
        (504, "the upstream server did not answer in time")
    } else {
        (502, "the upstream server could not be reached")
    };
    ServeError::Relay {
        status,
        message: message.to_owned(),
    }
}

fn too_slow(limit: Duration) -> ServeError {
    ServeError::Relay {
        status: 504,
        message: format!(
            "the upstream server did not answer within {} s",
            limit.as_secs()
        ),
    }
}

/// A last resort when a response cannot be built (a header value the upstream sent that the
/// builder rejects after all): 502 with no body.
fn internal() -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::BAD_GATEWAY;
    response
}
