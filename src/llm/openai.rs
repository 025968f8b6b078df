//! The OpenAI-compatible client: `/chat/completions` and `/completions`, streaming or not, on
//! OpenAI, Ollama, llama.cpp's `llama-server`, vLLM, TGI, LM Studio and gateways in front of them.
//!
//! # How it is built
//!
//! * **async-openai is the base.** Requests go through its `byot` methods
//!   (`chat().create_byot`, `create_stream_byot`, and the same on `completions()`), with our own
//!   request body (a JSON map: the token-limit field name is configurable and vendor fields are
//!   merged in) and our own lenient response type ([`WireChunk`]: every field
//!   `#[serde(default)]`, `finish_reason` a plain string, `reasoning_content`/`reasoning` kept).
//!   `"stream": true` is set by us (the `byot` feature removes async-openai's own guard). It
//!   also gives us SSE framing, `[DONE]`, and cancel-on-drop: dropping the stream at the first
//!   stop aborts the HTTP request, so the server stops generating.
//! * **We own the HTTP transport below it** (async-openai's `middleware` feature): a small tower
//!   service over our `reqwest::Client` replaces its default executor. This (a) turns off
//!   async-openai's built-in retries, which cannot be disabled otherwise, and (b) reads non-2xx
//!   answers itself, so the HTTP status and `Retry-After` survive error bodies that are not
//!   OpenAI-shaped (Ollama's `{"error":"…"}`, llama.cpp's integer `code`, HTML from a proxy),
//!   which async-openai would turn into a status-less deserialisation error.
//! * **Retries are ours**: exponential backoff with jitter (`backon`'s builder), for connection
//!   errors, read timeouts, 408, 429 (honouring `Retry-After`, capped) and 5xx, a bounded number
//!   of times, and only while no text has been passed to the caller (a retry never repeats
//!   deltas). Other 4xx are never retried.
//! * **Timeouts**: `connect_timeout` and `read_timeout` (idle time between bytes) on the HTTP
//!   client, never a whole-request timeout (it would kill long streams), and a wall-clock
//!   `turn_timeout` around the whole turn, retries included.
//!
//! # Stops
//!
//! At most four stop strings are sent (`send_stop`); all of them are enforced on our side by a
//! [`StopScanner`] over the streamed text, so whatever the server does the caller sees the same
//! thing: the text before the first stop, no partial stop string, and [`Finish::Stop`] naming it.
//!
//! * Server kept the stop (TGI) or ignored `stop`: the scanner cuts it → [`Enforcer::Client`].
//! * Server stripped the stop (OpenAI, vLLM, llama.cpp): `finish_reason: "stop"`. Which stop
//!   fired comes from vLLM's `stop_reason` when present, else from a trailing partial stop the
//!   server flushed (llama.cpp), else it is inferred as the closing tag of the latest unclosed
//!   element (`</action>` when an `<action>` is open); when nothing fits, the turn ends as
//!   [`Finish::End`] → [`Enforcer::Server`] whenever a stop is named.
//! * Server rejected `stop` (HTTP 400 whose body names `stop`, e.g. OpenAI reasoning models):
//!   the turn is asked again without stops, and the model remembers it for its lifetime.
//!
//! # Usage and reasoning
//!
//! `stream_options.include_usage` is sent on streamed requests when `include_usage` is on; the
//! usage chunk is read if it arrives. A turn whose stream we dropped (a client-side stop, the
//! degeneration guard) never gets it: its completion tokens are estimated from the bytes
//! received (4 bytes a token) and its prompt tokens stay zero. `reasoning_content` /
//! `reasoning` deltas are collected separately.
//!
//! # Degeneration
//!
//! Unless the request sets `keep_repetitions`, a [`RepeatGuard`] watches the text as it
//! arrives; when its tail repeats one unit over and over, the stream is dropped at once (the
//! server stops generating, as for a stop) and the turn ends as [`Finish::Repeated`], its text
//! cut after the first unit.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use backon::{BackoffBuilder, ExponentialBuilder};
use futures::StreamExt;
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::error::truncate;
use super::repeat::{RepeatGuard, Repetition};
use super::stops::StopScanner;
use super::{DeltaSink, Enforcer, Finish, LlmError, Model, Prompt, TurnRequest, TurnResult, Usage};

/// Most stop strings OpenAI accepts; more are enforced on our side only.
pub(crate) const MAX_SERVER_STOPS: usize = 4;

use super::Api;
use crate::secret::{Redactor, Secret};

/// Settings of an [`OpenAiModel`].
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Base URL including the version path, e.g. `http://127.0.0.1:11434/v1` (trailing `/` and a
    /// pasted `/chat/completions` are removed).
    pub base_url: String,
    /// Bearer key; may be empty for local servers. Never printed.
    pub api_key: Secret,
    /// Chat or plain completions.
    pub api: Api,
    /// Model name.
    pub model: String,
    /// Limit for establishing the connection.
    pub connect_timeout: Duration,
    /// Limit for silence between received bytes (not for the whole answer).
    pub read_timeout: Duration,
    /// Wall-clock limit for a whole turn, retries included (`None`: no limit).
    pub turn_timeout: Option<Duration>,
    /// Retries after the first attempt for transient failures.
    pub max_retries: u32,
    /// First backoff delay.
    pub retry_min_delay: Duration,
    /// Largest backoff delay.
    pub retry_max_delay: Duration,
    /// Largest `Retry-After` honoured.
    pub retry_after_cap: Duration,
    /// Stream the answer (SSE).
    pub stream: bool,
    /// Send the stop strings to the server (they are enforced on our side anyway).
    pub send_stop: bool,
    /// Ask for usage in the stream (`stream_options.include_usage`); some proxies reject it.
    pub include_usage: bool,
    /// Chat prompts that end with an assistant message are continued by the server.
    pub prefill: bool,
    /// Body field for the token limit (`max_tokens`, or `max_completion_tokens`).
    pub token_field: String,
    /// Extra body fields for every request (vendor options); a request's own `extra` wins.
    pub extra: Map<String, Value>,
    /// Extra HTTP headers for every request.
    pub headers: Vec<(String, String)>,
}

impl OpenAiConfig {
    /// Defaults for a base URL and a model: chat, streaming, stops sent, usage asked for,
    /// connect 10 s, read 120 s, turn 600 s, 3 retries from 500 ms up to 8 s, `Retry-After`
    /// capped at 30 s, token field `max_tokens`.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key: Secret::default(),
            api: Api::Chat,
            model: model.into(),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(120),
            turn_timeout: Some(Duration::from_secs(600)),
            max_retries: 3,
            retry_min_delay: Duration::from_millis(500),
            retry_max_delay: Duration::from_secs(8),
            retry_after_cap: Duration::from_secs(30),
            stream: true,
            send_stop: true,
            include_usage: true,
            prefill: false,
            token_field: "max_tokens".to_owned(),
            extra: Map::new(),
            headers: Vec::new(),
        }
    }
}

/// Normalise a user-supplied base URL: trim, drop trailing `/` and a pasted endpoint path.
pub fn normalize_base_url(raw: &str) -> Result<String, LlmError> {
    let mut s = raw.trim().trim_end_matches('/').to_owned();
    for suffix in ["/chat/completions", "/completions"] {
        if let Some(stripped) = s.strip_suffix(suffix) {
            s = stripped.trim_end_matches('/').to_owned();
        }
    }
    let url = reqwest::Url::parse(&s).map_err(|e| {
        LlmError::Config(format!(
            "base URL '{s}' is not a URL ({e}); expected e.g. http://127.0.0.1:11434/v1"
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(LlmError::Config(format!(
            "base URL '{s}' must start with http:// or https://"
        )));
    }
    Ok(s)
}

/// A non-2xx HTTP answer, read by our transport before async-openai can lose its status.
#[derive(Debug)]
struct HttpFailure {
    status: u16,
    retry_after: Option<Duration>,
    body: String,
}

impl std::fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}: {}", self.status, truncate(&self.body, 200))
    }
}

impl std::error::Error for HttpFailure {}

/// The tower service under async-openai: one attempt, no retries, status-preserving errors.
#[derive(Clone)]
struct Transport {
    http: reqwest::Client,
}

impl tower::Service<HttpRequestFactory> for Transport {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = Pin<Box<dyn Future<Output = Result<reqwest::Response, OpenAIError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> Self::Future {
        let http = self.http.clone();
        Box::pin(async move {
            let request = factory.build().await?;
            let response = http.execute(request).await?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(Duration::from_secs_f64);
            let body = response.text().await.unwrap_or_default();
            Err(OpenAIError::Boxed(Box::new(HttpFailure {
                status: status.as_u16(),
                retry_after,
                body,
            })))
        })
    }
}

/// Lenient wire type for both streamed chunks and whole answers, chat and completions.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct WireChunk {
    /// Choices (only index 0 is used).
    pub choices: Vec<WireChoice>,
    /// Usage, on the last chunk or the whole answer.
    pub usage: Option<WireUsage>,
    /// An in-band error object or string.
    pub error: Option<Value>,
}

/// One choice of a [`WireChunk`].
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct WireChoice {
    /// Choice index.
    pub index: u32,
    /// Streamed chat delta.
    pub delta: Option<WireMessage>,
    /// Whole chat message.
    pub message: Option<WireMessage>,
    /// Completions text.
    pub text: Option<String>,
    /// `stop`, `length`, `""`, or anything a server invents.
    pub finish_reason: Option<String>,
    /// vLLM: the stop string (or token id) that ended the turn.
    pub stop_reason: Option<Value>,
    /// Some servers put reasoning on the choice for completions.
    pub reasoning_content: Option<String>,
}

/// Chat message or delta.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct WireMessage {
    /// Text.
    pub content: Option<String>,
    /// DeepSeek / vLLM / llama.cpp reasoning.
    pub reasoning_content: Option<String>,
    /// Ollama / OpenRouter reasoning.
    pub reasoning: Option<String>,
}

/// Usage as servers send it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct WireUsage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

/// A model behind an OpenAI-compatible HTTP API.
pub struct OpenAiModel {
    cfg: OpenAiConfig,
    base_url: String,
    client: Client<OpenAIConfig>,
    stop_rejected: AtomicBool,
    /// The key (and its derived forms), removed from every error built from a server's answer.
    redactor: Redactor,
}

impl std::fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("cfg", &self.cfg)
            .field("stop_rejected", &self.stop_rejected.load(Ordering::Relaxed))
            .finish()
    }
}

/// What went wrong in one attempt, with what the retry loop needs to know.
struct AttemptError {
    err: LlmError,
    /// Text was already passed to the caller: never retry.
    emitted: bool,
    /// A 400 naming `stop`.
    stop_rejected: bool,
}

impl From<LlmError> for AttemptError {
    fn from(err: LlmError) -> Self {
        AttemptError {
            err,
            emitted: false,
            stop_rejected: false,
        }
    }
}

impl OpenAiModel {
    /// Build a client (no request is made yet).
    pub fn new(mut cfg: OpenAiConfig) -> Result<Self, LlmError> {
        let base_url = normalize_base_url(&cfg.base_url)?;
        cfg.base_url = base_url.clone();
        let http = reqwest::Client::builder()
            .connect_timeout(cfg.connect_timeout)
            .read_timeout(cfg.read_timeout)
            .build()
            .map_err(|e| LlmError::Config(format!("cannot build the HTTP client: {e}")))?;
        let mut oa = OpenAIConfig::new()
            .with_api_base(base_url.clone())
            .with_api_key(cfg.api_key.expose());
        for (k, v) in &cfg.headers {
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                .map_err(|e| LlmError::Config(format!("bad header name '{k}': {e}")))?;
            oa = oa
                .with_header(name, v.as_str())
                .map_err(|e| LlmError::Config(format!("bad header '{k}': {e}")))?;
        }
        let client = Client::with_config(oa).with_http_service(Transport { http });
        let mut redactor = Redactor::new();
        redactor.add_secret(&cfg.api_key);
        Ok(OpenAiModel {
            cfg,
            base_url,
            client,
            stop_rejected: AtomicBool::new(false),
            redactor,
        })
    }

    /// The settings in use (base URL normalised).
    pub fn config(&self) -> &OpenAiConfig {
        &self.cfg
    }

    /// Whether the server rejected `stop` earlier, so stops are no longer sent.
    pub fn stop_rejected(&self) -> bool {
        self.stop_rejected.load(Ordering::Relaxed)
    }

    /// The JSON body for a request.
    pub fn request_body(
        &self,
        req: &TurnRequest,
        send_stops: bool,
        stream: bool,
    ) -> Result<Value, LlmError> {
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.cfg.model.clone()));
        match (&req.prompt, self.cfg.api) {
            (Prompt::Chat(messages), Api::Chat) => {
                let v =
                    serde_json::to_value(messages).map_err(|e| LlmError::Other(e.to_string()))?;
                body.insert("messages".into(), v);
            }
            (Prompt::Text(text), Api::Completions) => {
                body.insert("prompt".into(), Value::String(text.clone()));
            }
            (Prompt::Text(_), Api::Chat) => {
                return Err(LlmError::Config(
                    "a text prompt was given to a chat endpoint; use --api completions".into(),
                ));
            }
            (Prompt::Chat(_), Api::Completions) => {
                return Err(LlmError::Config(
                    "chat messages were given to a completions endpoint; use --api chat".into(),
                ));
            }
        }
        if send_stops {
            let stops: Vec<Value> = req
                .stop
                .iter()
                .filter(|s| !s.is_empty())
                .take(MAX_SERVER_STOPS)
                .map(|s| Value::String(s.clone()))
                .collect();
            if !stops.is_empty() {
                body.insert("stop".into(), Value::Array(stops));
            }
        }
        if let Some(t) = req.temperature {
            body.insert("temperature".into(), Value::from(f64::from(t)));
        }
        if let Some(m) = req.max_tokens {
            body.insert(self.cfg.token_field.clone(), Value::from(m));
        }
        if let Some(s) = req.seed {
            body.insert("seed".into(), Value::from(s));
        }
        body.insert("stream".into(), Value::Bool(stream));
        if stream && self.cfg.include_usage {
            body.insert(
                "stream_options".into(),
                serde_json::json!({ "include_usage": true }),
            );
        }
        for (k, v) in self.cfg.extra.iter().chain(req.extra.iter()) {
            body.insert(k.clone(), v.clone());
        }
        Ok(Value::Object(body))
    }

    async fn run_turn(
        &self,
        req: &TurnRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<TurnResult, LlmError> {
        let started = Instant::now();
        let mut backoff = ExponentialBuilder::default()
            .with_min_delay(self.cfg.retry_min_delay)
            .with_max_delay(self.cfg.retry_max_delay)
            .with_max_times(self.cfg.max_retries as usize)
            .with_jitter()
            .build();
        let mut attempts: u32 = 0;
        loop {
            attempts += 1;
            let send_stops = self.cfg.send_stop
                && !self.stop_rejected()
                && req.stop.iter().any(|s| !s.is_empty());
            match self.attempt(req, send_stops, &mut *on_delta, started).await {
                Ok(r) => return Ok(r),
                Err(AttemptError {
                    stop_rejected: true,
                    err,
                    ..
                }) if send_stops => {
                    tracing::warn!(model = %self.cfg.model, error = %err, "the server rejected `stop`; asking again without it (stops stay enforced on our side)");
                    self.stop_rejected.store(true, Ordering::Relaxed);
                    attempts -= 1;
                }
                Err(AttemptError { err, emitted, .. }) => {
                    if emitted || !err.is_retryable() {
                        return Err(err);
                    }
                    let Some(delay) = backoff.next() else {
                        return Err(if attempts > 1 {
                            LlmError::GaveUp {
                                attempts,
                                last: Box::new(err),
                            }
                        } else {
                            err
                        });
                    };
                    let delay = err
                        .retry_after()
                        .map_or(delay, |ra| ra.min(self.cfg.retry_after_cap));
                    tracing::warn!(attempt = attempts, delay_ms = delay.as_millis() as u64, error = %err, "model request failed; retrying");
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    async fn attempt(
        &self,
        req: &TurnRequest,
        send_stops: bool,
        on_delta: DeltaSink<'_>,
        started: Instant,
    ) -> Result<TurnResult, AttemptError> {
        let stream = self.cfg.stream;
        let body = self.request_body(req, send_stops, stream)?;
        let mut state = TurnState::new(&req.stop, started, !req.keep_repetitions);
        if stream {
            let opened = match self.cfg.api {
                Api::Chat => {
                    self.client
                        .chat()
                        .create_stream_byot::<_, WireChunk>(&body)
                        .await
                }
                Api::Completions => {
                    self.client
                        .completions()
                        .create_stream_byot::<_, WireChunk>(&body)
                        .await
                }
            };
            let mut events = opened.map_err(|e| self.convert(e, 0))?;
            let mut last_event = Instant::now();
            while let Some(item) = events.next().await {
                let chunk = item.map_err(|e| {
                    let mut a = self.convert(e, state.received);
                    // async-openai reduces body errors to text; a failure after a silence as
                    // long as the read timeout is the read timeout.
                    if matches!(a.err, LlmError::StreamCut { .. })
                        && last_event.elapsed() + Duration::from_millis(20) >= self.cfg.read_timeout
                    {
                        a.err = LlmError::ReadTimeout {
                            url: self.base_url.clone(),
                            limit: self.cfg.read_timeout,
                        };
                    }
                    a.emitted = state.emitted;
                    a
                })?;
                last_event = Instant::now();
                if let Err(err) = state.absorb(chunk, &self.base_url, &mut *on_delta) {
                    return Err(AttemptError {
                        err,
                        emitted: state.emitted,
                        stop_rejected: false,
                    });
                }
                if state.scanner.is_stopped() || state.repeated.is_some() {
                    break; // dropping `events` aborts the request: the server stops generating
                }
            }
        } else {
            let answer = match self.cfg.api {
                Api::Chat => self.client.chat().create_byot::<_, WireChunk>(&body).await,
                Api::Completions => {
                    self.client
                        .completions()
                        .create_byot::<_, WireChunk>(&body)
                        .await
                }
            };
            let chunk = answer.map_err(|e| self.convert(e, 0))?;
            state.absorb(chunk, &self.base_url, &mut *on_delta)?;
        }
        state
            .finish(send_stops.then_some(req.stop.as_slice()), &self.base_url)
            .map_err(AttemptError::from)
    }

    /// Turn an async-openai error into ours, keeping the HTTP status.
    fn convert(&self, e: OpenAIError, received: usize) -> AttemptError {
        let url = self.base_url.clone();
        let err = match e {
            OpenAIError::Boxed(b) => match b.downcast::<HttpFailure>() {
                Ok(f) => {
                    // The body is the server's text: the key it may echo goes before anything
                    // is built from it.
                    let body = self.redactor.redact(&f.body);
                    let stop_rejected = f.status == 400 && names_stop(&body);
                    return AttemptError {
                        err: classify_status(f.status, f.retry_after, &body, &url, &self.cfg.model),
                        emitted: false,
                        stop_rejected,
                    };
                }
                Err(other) => match other.downcast::<reqwest::Error>() {
                    Ok(re) => reqwest_error(&re, &url, self.cfg.read_timeout),
                    Err(other) => LlmError::Other(other.to_string()),
                },
            },
            OpenAIError::Reqwest(re) => reqwest_error(&re, &url, self.cfg.read_timeout),
            OpenAIError::ApiError(api) => {
                let status = api.status_code.as_u16();
                let message = self.redactor.redact(&api.api_error.message);
                classify_status(status, None, &message, &url, &self.cfg.model)
            }
            OpenAIError::JSONDeserialize(err, raw) => LlmError::Malformed {
                url,
                reason: err.to_string(),
                snippet: truncate(&raw, 200),
            },
            OpenAIError::StreamError(se) => {
                let reason = se.to_string();
                if reason.contains("timed out") || reason.contains("timeout") {
                    LlmError::ReadTimeout {
                        url,
                        limit: self.cfg.read_timeout,
                    }
                } else {
                    LlmError::StreamCut {
                        url,
                        received,
                        reason: innermost_text(&reason),
                    }
                }
            }
            OpenAIError::InvalidArgument(s) => LlmError::Config(s),
            other => LlmError::Other(other.to_string()),
        };
        AttemptError {
            err: err.redacted(&self.redactor),
            emitted: false,
            stop_rejected: false,
        }
    }
}

fn innermost_text(s: &str) -> String {
    s.trim_start_matches("EventStream error: ").to_owned()
}

/// Whether a 400 body complains about the `stop` parameter.
fn names_stop(body: &str) -> bool {
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
fn error_message(body: &str) -> String {
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
    truncate(body.trim(), 300)
}

fn classify_status(
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

fn reqwest_error(e: &reqwest::Error, url: &str, read_timeout: Duration) -> LlmError {
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

/// Accumulates one attempt's answer.
struct TurnState {
    scanner: StopScanner,
    reasoning: String,
    usage: Usage,
    finish_reason: Option<String>,
    stop_reason: Option<Value>,
    saw_choice: bool,
    received: usize,
    emitted: bool,
    started: Instant,
    first_token: Option<Duration>,
    /// The degeneration guard, when the request did not turn it off.
    guard: Option<RepeatGuard>,
    /// The repetition the guard found; the turn ends there.
    repeated: Option<Repetition>,
}

impl TurnState {
    fn new(stops: &[String], started: Instant, guard: bool) -> Self {
        TurnState {
            guard: guard.then(RepeatGuard::default),
            repeated: None,
            scanner: StopScanner::new(stops),
            reasoning: String::new(),
            usage: Usage::default(),
            finish_reason: None,
            stop_reason: None,
            saw_choice: false,
            received: 0,
            emitted: false,
            started,
            first_token: None,
        }
    }

    fn absorb(
        &mut self,
        chunk: WireChunk,
        url: &str,
        on_delta: DeltaSink<'_>,
    ) -> Result<(), LlmError> {
        if let Some(err) = chunk.error.filter(|e| !e.is_null()) {
            let message = match &err {
                Value::String(s) => s.clone(),
                other => other
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| other.to_string(), str::to_owned),
            };
            return Err(LlmError::Server {
                url: url.to_owned(),
                message,
            });
        }
        if let Some(u) = chunk.usage {
            self.usage = Usage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
            };
        }
        let Some(choice) = chunk.choices.into_iter().find(|c| c.index == 0) else {
            return Ok(());
        };
        self.saw_choice = true;
        let (content, reasoning) = match (choice.delta, choice.message) {
            (Some(m), _) | (None, Some(m)) => (m.content, m.reasoning_content.or(m.reasoning)),
            (None, None) => (None, None),
        };
        if let Some(r) = reasoning.or(choice.reasoning_content) {
            self.reasoning.push_str(&r);
        }
        if let Some(fr) = choice.finish_reason.filter(|f| !f.is_empty()) {
            self.finish_reason = Some(fr);
        }
        if choice.stop_reason.as_ref().is_some_and(|v| !v.is_null()) {
            self.stop_reason = choice.stop_reason;
        }
        let text = content.or(choice.text).unwrap_or_default();
        if !text.is_empty() {
            self.received += text.len();
            let safe = self.scanner.push(&text);
            if !safe.is_empty() {
                self.first_token
                    .get_or_insert_with(|| self.started.elapsed());
                self.emitted = true;
                on_delta(safe);
            }
            if self.repeated.is_none()
                && let Some(guard) = &mut self.guard
            {
                self.repeated = guard.check(self.scanner.text());
            }
        }
        Ok(())
    }

    fn finish(mut self, sent_stops: Option<&[String]>, url: &str) -> Result<TurnResult, LlmError> {
        if !self.saw_choice {
            return Err(LlmError::EmptyChoices {
                url: url.to_owned(),
            });
        }
        // A stream we cut ourselves (a stop the server ignored, a repetition) never gets the
        // server's closing count: estimate what it generated rather than report nothing.
        if self.usage.completion_tokens == 0 && self.received > 0 {
            self.usage.completion_tokens = (self.received as u64).div_ceil(4);
        }
        let (finish, enforced_by) = if let Some(stop) = self.scanner.stopped() {
            (Finish::Stop(stop.to_owned()), Some(Enforcer::Client))
        } else if let Some(rep) = self.repeated {
            tracing::warn!(
                period = rep.period,
                repeats = rep.repeats,
                "the turn kept repeating itself: cut at the first repetition"
            );
            let mut text = self.scanner.into_text();
            text.truncate(rep.cut);
            let reasoning = (!self.reasoning.is_empty()).then_some(self.reasoning);
            return Ok(TurnResult {
                text,
                finish: Finish::Repeated,
                enforced_by: None,
                reasoning,
                usage: self.usage,
                elapsed: self.started.elapsed(),
                first_token: self.first_token,
            });
        } else {
            let held = self.scanner.held().to_owned();
            self.scanner.finish();
            match self.finish_reason.as_deref() {
                Some("length") => (Finish::Length, None),
                reason => {
                    let server_stopped =
                        sent_stops.is_some() && matches!(reason, Some("stop") | None);
                    match sent_stops.filter(|_| server_stopped).and_then(|stops| {
                        which_stop(self.scanner.text(), &held, self.stop_reason.as_ref(), stops)
                    }) {
                        Some(stop) => (Finish::Stop(stop), Some(Enforcer::Server)),
                        None => (Finish::End, None),
                    }
                }
            }
        };
        let reasoning = (!self.reasoning.is_empty()).then_some(self.reasoning);
        Ok(TurnResult {
            text: self.scanner.into_text(),
            finish,
            enforced_by,
            reasoning,
            usage: self.usage,
            elapsed: self.started.elapsed(),
            first_token: self.first_token,
        })
    }
}

/// Which of the sent stops a server that stripped it stopped at (see the module docs).
fn which_stop(
    text: &str,
    held: &str,
    stop_reason: Option<&Value>,
    stops: &[String],
) -> Option<String> {
    if let Some(Value::String(s)) = stop_reason
        && stops.iter().any(|x| x == s)
    {
        return Some(s.clone());
    }
    if !held.is_empty()
        && let Some(s) = stops.iter().find(|s| s.starts_with(held))
    {
        return Some(s.clone());
    }
    // The closing tag of the latest unclosed element.
    let mut best: Option<(usize, &String)> = None;
    for stop in stops {
        let Some(name) = stop.strip_prefix("</").and_then(|s| s.strip_suffix('>')) else {
            continue;
        };
        let open = format!("<{name}");
        let last_open = text.rmatch_indices(&open).map(|(i, _)| i).find(|&i| {
            matches!(
                text.as_bytes().get(i + open.len()),
                Some(b'>' | b' ' | b'\n' | b'\t' | b'\r')
            )
        });
        let last_close = text.rfind(stop.as_str());
        if let Some(o) = last_open
            && last_close.is_none_or(|c| c < o)
            && best.is_none_or(|(b, _)| o > b)
        {
            best = Some((o, stop));
        }
    }
    best.map(|(_, s)| s.clone())
}

impl Model for OpenAiModel {
    fn turn<'a>(
        &'a self,
        request: &'a TurnRequest,
        on_delta: DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<TurnResult, LlmError>> {
        Box::pin(async move {
            let result = match self.cfg.turn_timeout {
                Some(limit) => tokio::time::timeout(limit, self.run_turn(request, on_delta))
                    .await
                    .unwrap_or(Err(LlmError::TurnTimeout { limit })),
                None => self.run_turn(request, on_delta).await,
            };
            // Errors from inside a 200 answer (a stream's `error` event) are redacted here.
            result.map_err(|e| e.redacted(&self.redactor))
        })
    }

    fn supports_prefill(&self) -> bool {
        self.cfg.prefill && self.cfg.api == Api::Chat
    }

    fn describe(&self) -> String {
        let api = match self.cfg.api {
            Api::Chat => "chat",
            Api::Completions => "completions",
        };
        format!("{} ({api}) at {}", self.cfg.model, self.base_url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_is_normalised() {
        assert_eq!(
            normalize_base_url(" http://h:1/v1/ ").unwrap(),
            "http://h:1/v1"
        );
        assert_eq!(
            normalize_base_url("http://h/v1/chat/completions").unwrap(),
            "http://h/v1"
        );
        assert!(normalize_base_url("localhost:11434").is_err());
        assert!(normalize_base_url("ftp://x").is_err());
    }

    #[test]
    fn secret_is_never_printed() {
        let mut cfg = OpenAiConfig::new("http://h/v1", "m");
        cfg.api_key = Secret::new("sk-very-secret");
        let dbg = format!("{cfg:?}");
        assert!(!dbg.contains("sk-very-secret"), "{dbg}");
        let model = OpenAiModel::new(cfg).unwrap();
        assert!(!format!("{model:?}").contains("sk-very"));
        assert!(!model.describe().contains("sk-very"));
    }

    #[test]
    fn body_has_at_most_four_stops_and_token_field() {
        let mut cfg = OpenAiConfig::new("http://h/v1", "m");
        cfg.token_field = "max_completion_tokens".into();
        let model = OpenAiModel::new(cfg).unwrap();
        let req = TurnRequest {
            prompt: Prompt::Chat(vec![super::super::Message::new(
                super::super::Role::User,
                "hi",
            )]),
            stop: (0..6).map(|i| format!("s{i}")).collect(),
            max_tokens: Some(7),
            ..Default::default()
        };
        let b = model.request_body(&req, true, true).unwrap();
        assert_eq!(b["stop"].as_array().unwrap().len(), 4);
        assert_eq!(b["max_completion_tokens"], 7);
        assert_eq!(b["stream"], true);
        assert_eq!(b["stream_options"]["include_usage"], true);
        let b = model.request_body(&req, false, false).unwrap();
        assert!(b.get("stop").is_none());
        assert!(b.get("stream_options").is_none());
    }

    #[test]
    fn infers_stripped_stop() {
        let stops: Vec<String> = vec![
            "</action>".into(),
            "<observation>".into(),
            "</final_answer>".into(),
        ];
        assert_eq!(
            which_stop("<thought>x</thought><action>f()", "", None, &stops).as_deref(),
            Some("</action>")
        );
        assert_eq!(
            which_stop("<final_answer>42", "", None, &stops).as_deref(),
            Some("</final_answer>")
        );
        assert_eq!(which_stop("plain", "", None, &stops), None);
        assert_eq!(
            which_stop("x", "</fin", None, &stops).as_deref(),
            Some("</final_answer>")
        );
        let sr = Value::String("<observation>".into());
        assert_eq!(
            which_stop("x", "", Some(&sr), &stops).as_deref(),
            Some("<observation>")
        );
    }

    #[test]
    fn error_bodies_keep_their_message() {
        assert_eq!(
            error_message(r#"{"error":"model 'x' not found"}"#),
            "model 'x' not found"
        );
        assert_eq!(
            error_message(r#"{"error":{"code":400,"message":"bad"}}"#),
            "bad"
        );
        assert_eq!(error_message("<html>oops</html>"), "<html>oops</html>");
        assert!(names_stop(
            r#"{"error":{"message":"Unsupported parameter: 'stop' is not supported with this model.","param":"stop"}}"#
        ));
        assert!(!names_stop(r#"{"error":"context length exceeded"}"#));
    }
}
