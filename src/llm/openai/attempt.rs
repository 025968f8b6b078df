//! One turn as requests: the request body, attempts with retries and backoff, and the
//! conversion of async-openai's errors into ours (keeping the HTTP status).

use super::errors::*;
use super::plain::Fault;
use super::server::names_grammar;
use super::state::*;
use super::transport::*;
use super::wire::*;
use super::*;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use backon::{BackoffBuilder, ExponentialBuilder};
use serde_json::{Map, Value};

use crate::llm::notice::quote;
use crate::llm::{
    Constraint, DeltaSink, LlmError, NOTICE_LOG_TARGET, Notice, NoticeKind, Prompt, TurnRequest,
    TurnResult,
};
use crate::text::clip_bytes;

/// The JSON strings of the last few system prompts: every turn of every task of a batch sends
/// the same one (kilobytes of text to escape again each time otherwise).
#[derive(Debug, Default)]
pub(super) struct SystemCache {
    /// (text, its JSON string), the most recently used last.
    slots: std::sync::Mutex<Vec<(String, Vec<u8>)>>,
}

impl SystemCache {
    /// Prompts kept.
    const SLOTS: usize = 4;

    /// Write `text` as a JSON string, from the cache when it is there.
    fn write(&self, out: &mut Vec<u8>, text: &str) -> serde_json::Result<()> {
        let Ok(mut slots) = self.slots.lock() else {
            return serde_json::to_writer(out, text);
        };
        if let Some(i) = slots.iter().rposition(|(t, _)| t == text) {
            let slot = slots.remove(i);
            out.extend_from_slice(&slot.1);
            slots.push(slot);
            return Ok(());
        }
        let mut json = Vec::with_capacity(text.len() + 16);
        serde_json::to_writer(&mut json, text)?;
        out.extend_from_slice(&json);
        if slots.len() == Self::SLOTS {
            slots.remove(0);
        }
        slots.push((text.to_owned(), json));
        Ok(())
    }
}

/// The largest server-sent event accepted (a chunk is a few hundred bytes; a server that never
/// ends an event is cut off here rather than filling the memory).
const MAX_EVENT: usize = 8 << 20;

/// The part of an error answer's body that is kept.
const MAX_ERROR_BODY: usize = 1 << 20;

/// A streamed answer's body, read by our HTTP/1.1 reader or by reqwest.
enum Body<'c> {
    Plain(super::plain::Response<'c>),
    Reqwest(reqwest::Response),
}

/// Most stop strings OpenAI accepts; more are enforced on our side only.
const MAX_SERVER_STOPS: usize = 4;

use crate::llm::Api;
use crate::secret::Redactor;

impl OpenAiModel {
    /// Build a client (no request is made yet).
    pub fn new(mut cfg: OpenAiConfig) -> Result<Self, LlmError> {
        let base_url = normalize_base_url(&cfg.base_url)?;
        cfg.base_url = base_url.clone();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(cfg.connect_timeout)
            .read_timeout(cfg.read_timeout);
        if base_url.starts_with("http://") {
            // Plain HTTP (a local server): no TLS is ever needed, and loading the system's root
            // certificates is most of the start-up time of a short run.
            builder = builder.tls_certs_only([]);
        }
        let http = builder
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
        let headers = stream_headers(&cfg)?;
        // `build` takes our HTTP client (`with_config` would make one more, certificates and all).
        let client =
            Client::build(http.clone(), oa).with_http_service(Transport { http: http.clone() });
        let mut redactor = Redactor::new();
        redactor.add_secret(&cfg.api_key);
        let plain = if cfg.own_http {
            super::plain::PlainHttp::for_url(
                &base_url,
                &headers,
                cfg.connect_timeout,
                cfg.read_timeout,
            )
        } else {
            None
        };
        Ok(OpenAiModel {
            cfg,
            base_url,
            client,
            http,
            headers,
            plain,
            system_json: SystemCache::default(),
            stop_rejected: AtomicBool::new(false),
            grammar_rejected: AtomicBool::new(false),
            server: tokio::sync::OnceCell::new(),
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

    /// Whether the server refused the grammar field earlier, so grammars are no longer sent.
    pub fn grammar_rejected(&self) -> bool {
        self.grammar_rejected.load(Ordering::Relaxed)
    }

    /// The JSON body for a request.
    pub fn request_body(
        &self,
        req: &TurnRequest,
        send_stops: bool,
        stream: bool,
    ) -> Result<Value, LlmError> {
        let fields = self.request_fields(req, send_stops, stream)?;
        Ok(self.whole_body(req, fields))
    }

    /// `model`, the prompt (`messages` or `prompt`), then `fields`.
    fn whole_body(&self, req: &TurnRequest, fields: Map<String, Value>) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.cfg.model.clone()));
        match &req.prompt {
            Prompt::Chat(messages) => {
                body.insert(
                    "messages".into(),
                    serde_json::to_value(messages).unwrap_or(Value::Null),
                );
            }
            Prompt::Text(text) => {
                body.insert("prompt".into(), Value::String(text.clone()));
            }
        }
        // A field of the configuration's `extra` may override even these.
        body.extend(fields);
        Value::Object(body)
    }

    /// Every field of the body but `model` and the prompt; checks that the prompt fits the API.
    pub(super) fn request_fields(
        &self,
        req: &TurnRequest,
        send_stops: bool,
        stream: bool,
    ) -> Result<Map<String, Value>, LlmError> {
        match (&req.prompt, self.cfg.api) {
            (Prompt::Chat(_), Api::Chat) | (Prompt::Text(_), Api::Completions) => {}
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
        let mut body = Map::new();
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
        Ok(body)
    }

    /// The body's bytes, written straight from the request's messages (a turn late in a run
    /// carries the whole history: copying it into a JSON value first would double the work).
    /// A system message's JSON form is kept between requests ([`SystemCache`]).
    pub(super) fn body_bytes(
        &self,
        req: &TurnRequest,
        fields: &Map<String, Value>,
    ) -> Result<Vec<u8>, LlmError> {
        let encode =
            |e: serde_json::Error| LlmError::Other(format!("cannot encode the request: {e}"));
        if ["model", "messages", "prompt"]
            .iter()
            .any(|k| fields.contains_key(*k))
        {
            // The configuration overrides one of them: the general path keeps its value.
            return serde_json::to_vec(&self.whole_body(req, fields.clone())).map_err(encode);
        }
        let size = match &req.prompt {
            Prompt::Chat(m) => m.iter().map(|m| m.content.len() + 32).sum::<usize>(),
            Prompt::Text(t) => t.len(),
        };
        let mut out = Vec::with_capacity(size + 512);
        out.extend_from_slice(b"{\"model\":");
        serde_json::to_writer(&mut out, &self.cfg.model).map_err(encode)?;
        match &req.prompt {
            Prompt::Chat(messages) => {
                out.extend_from_slice(b",\"messages\":[");
                for (i, m) in messages.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(b"{\"role\":");
                    serde_json::to_writer(&mut out, &m.role).map_err(encode)?;
                    out.extend_from_slice(b",\"content\":");
                    if m.role == crate::llm::Role::System {
                        self.system_json.write(&mut out, &m.content)
                    } else {
                        serde_json::to_writer(&mut out, &m.content)
                    }
                    .map_err(encode)?;
                    out.push(b'}');
                }
                out.push(b']');
            }
            Prompt::Text(t) => {
                out.extend_from_slice(b",\"prompt\":");
                serde_json::to_writer(&mut out, t).map_err(encode)?;
            }
        }
        for (k, v) in fields {
            out.push(b',');
            serde_json::to_writer(&mut out, k).map_err(encode)?;
            out.push(b':');
            serde_json::to_writer(&mut out, v).map_err(encode)?;
        }
        out.push(b'}');
        Ok(out)
    }

    pub(super) async fn run_turn(
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
            let constraint = self.constraint_for(req.grammar.as_deref()).await;
            match self
                .attempt(req, send_stops, constraint, &mut *on_delta, started)
                .await
            {
                Ok(r) => return Ok(r),
                Err(AttemptError {
                    grammar_rejected: true,
                    err,
                    ..
                }) if constraint.is_constrained() => {
                    tracing::warn!(target: NOTICE_LOG_TARGET, model = %self.cfg.model, error = %err, "the server rejected the grammar; asking again without it, and sending none from now on");
                    req.notify(Notice::new(
                        NoticeKind::GrammarRejected,
                        format!("the server rejected the grammar ({}); asking again without it, and sending none from now on", quote(&err)),
                    ));
                    self.grammar_rejected.store(true, Ordering::Relaxed);
                    attempts -= 1;
                }
                Err(AttemptError {
                    stop_rejected: true,
                    err,
                    ..
                }) if send_stops => {
                    tracing::warn!(target: NOTICE_LOG_TARGET, model = %self.cfg.model, error = %err, "the server rejected `stop`; asking again without it (stops stay enforced on our side)");
                    req.notify(Notice::new(
                        NoticeKind::StopRejected,
                        format!("the server rejected `stop` ({}); asking again without it (stops stay enforced on our side)", quote(&err)),
                    ));
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
                    tracing::warn!(target: NOTICE_LOG_TARGET, attempt = attempts, delay_ms = delay.as_millis() as u64, error = %err, "model request failed; retrying");
                    req.notify(Notice::new(
                        NoticeKind::Retry,
                        format!(
                            "model request {attempts} failed ({}); retrying in {:.1} s",
                            quote(&err),
                            delay.as_secs_f64()
                        ),
                    ));
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    pub(super) async fn attempt(
        &self,
        req: &TurnRequest,
        send_stops: bool,
        constraint: Constraint,
        on_delta: DeltaSink<'_>,
        started: Instant,
    ) -> Result<TurnResult, AttemptError> {
        let stream = self.cfg.stream;
        let mut fields = self.request_fields(req, send_stops, stream)?;
        if let Some(grammar) = req.grammar.as_deref() {
            self.add_grammar(&mut fields, grammar, constraint).await;
        }
        let mut state = TurnState::new(&req.stop, started, !req.keep_repetitions);
        if stream {
            let body = self.body_bytes(req, &fields)?;
            self.stream(body, &mut state, &mut *on_delta).await?;
        } else {
            let body = self.whole_body(req, fields);
            let answer = match self.cfg.api {
                Api::Chat => self.client.chat().create_byot::<_, OwnedChunk>(&body).await,
                Api::Completions => {
                    self.client
                        .completions()
                        .create_byot::<_, OwnedChunk>(&body)
                        .await
                }
            };
            let chunk = answer.map_err(|e| self.convert(e, 0))?.0;
            state.absorb(chunk, &self.base_url, &mut *on_delta)?;
        }
        let mut result = state
            .finish(send_stops.then_some(req.stop.as_slice()), &self.base_url)
            .map_err(AttemptError::from)?;
        result.constraint = constraint;
        Ok(result)
    }

    /// A streamed turn: the request sent with our HTTP client, the server-sent events read as
    /// they arrive ([`super::sse`]) and absorbed into `state`. Returning early (a stop string
    /// seen, a repetition) drops the response, which aborts the request: the server stops
    /// generating.
    async fn stream(
        &self,
        body: Vec<u8>,
        state: &mut TurnState,
        on_delta: DeltaSink<'_>,
    ) -> Result<(), AttemptError> {
        let path = match self.cfg.api {
            Api::Chat => "/chat/completions",
            Api::Completions => "/completions",
        };
        let mut response = match &self.plain {
            Some(plain) => match plain.post(path, &body).await {
                Ok(r) if (200..300).contains(&r.status) => Body::Plain(r),
                Ok(r) if (300..400).contains(&r.status) => {
                    // This client follows no redirection (a streamed POST should not wander);
                    // say where the server points instead.
                    let message = match &r.location {
                        Some(to) => format!(
                            "it redirects to {to}; use that address (without the endpoint path) as the base URL"
                        ),
                        None => "it redirects elsewhere; check the base URL".to_owned(),
                    };
                    return Err(AttemptError::from(
                        LlmError::Http {
                            status: r.status,
                            url: self.base_url.clone(),
                            message,
                        }
                        .redacted(&self.redactor),
                    ));
                }
                Ok(r) => {
                    let (status, retry_after) = (r.status, r.retry_after);
                    let body = r.text(MAX_ERROR_BODY).await;
                    return Err(self.failure(HttpFailure {
                        status,
                        retry_after,
                        body,
                    }));
                }
                Err(fault) => {
                    return Err(AttemptError::from(
                        self.fault(fault).redacted(&self.redactor),
                    ));
                }
            },
            None => {
                let sent = self
                    .http
                    .post(format!("{}{path}", self.base_url))
                    .headers(self.headers.clone())
                    .body(body)
                    .send()
                    .await;
                match sent {
                    Ok(r) if r.status().is_success() => Body::Reqwest(r),
                    Ok(r) => return Err(self.failure(read_failure(r).await)),
                    Err(e) => {
                        let err = reqwest_error(&e, &self.base_url, self.cfg.read_timeout);
                        return Err(AttemptError::from(err.redacted(&self.redactor)));
                    }
                }
            }
        };
        let fail = |err: LlmError, state: &TurnState| AttemptError {
            err: err.redacted(&self.redactor),
            emitted: state.emitted,
            stop_rejected: false,
            grammar_rejected: false,
        };
        let mut events = super::sse::Decoder::with_capacity(16 * 1024);
        let mut template = super::chunk::Template::default();
        let mut at_end = false;
        loop {
            while let Some(event) = events.next(at_end) {
                if event.name == b"keepalive" {
                    continue;
                }
                if event.data == b"[DONE]" {
                    if let Body::Plain(r) = response {
                        // Its connection is reused when the body's end is already here.
                        r.finish();
                    }
                    return Ok(());
                }
                let parsed = match template.read(event.data) {
                    Some(super::chunk::Chunk::Text(text)) => {
                        // Nothing but choice 0's text (see `Template`).
                        state.absorb_text(&text, &mut *on_delta);
                        if state.scanner.is_stopped() || state.repeated.is_some() {
                            return Ok(());
                        }
                        continue;
                    }
                    Some(super::chunk::Chunk::Whole(chunk)) => Ok(chunk),
                    None => serde_json::from_slice::<WireChunk>(event.data),
                };
                let chunk = parsed.map_err(|e| {
                    let err = LlmError::Malformed {
                        url: self.base_url.clone(),
                        reason: e.to_string(),
                        snippet: clip_bytes(&String::from_utf8_lossy(event.data), 200),
                    };
                    fail(err, state)
                })?;
                state
                    .absorb(chunk, &self.base_url, &mut *on_delta)
                    .map_err(|e| fail(e, state))?;
                if state.scanner.is_stopped() || state.repeated.is_some() {
                    return Ok(());
                }
            }
            if events.pending() > MAX_EVENT {
                let err = LlmError::Malformed {
                    url: self.base_url.clone(),
                    reason: format!("an event of over {} MiB that does not end", MAX_EVENT >> 20),
                    snippet: String::new(),
                };
                return Err(fail(err, state));
            }
            if at_end {
                return Ok(());
            }
            let read = match &mut response {
                Body::Plain(r) => r
                    .read(&mut |bytes| events.feed(bytes))
                    .await
                    .map_err(|f| self.fault(f)),
                Body::Reqwest(r) => match r.chunk().await {
                    Ok(Some(bytes)) => {
                        events.feed(&bytes);
                        Ok(true)
                    }
                    Ok(None) => Ok(false),
                    // reqwest says when a read timed out (the idle time between chunks).
                    Err(e) => Err(reqwest_error(&e, &self.base_url, self.cfg.read_timeout)),
                },
            };
            match read {
                Ok(more) => at_end = !more,
                Err(mut err) => {
                    if let LlmError::StreamCut { received, .. } = &mut err {
                        *received = state.received;
                    }
                    return Err(fail(err, state));
                }
            }
        }
    }

    /// A fault of our own HTTP reader as our error (the kinds reqwest's are mapped to).
    fn fault(&self, fault: Fault) -> LlmError {
        let url = self.base_url.clone();
        match fault {
            Fault::Connect(reason) => LlmError::Connect { url, reason },
            Fault::Timeout => LlmError::ReadTimeout {
                url,
                limit: self.cfg.read_timeout,
            },
            Fault::Cut(reason) => LlmError::StreamCut {
                url,
                received: 0,
                reason,
            },
            Fault::NotHttp(reason, start) => LlmError::Malformed {
                url,
                reason,
                snippet: clip_bytes(&String::from_utf8_lossy(&start), 200),
            },
        }
    }

    /// A non-2xx answer as our error, keeping the status (and whether a 400 named `stop` or the
    /// grammar field).
    fn failure(&self, f: HttpFailure) -> AttemptError {
        // The body is the server's text: the key it may echo goes before anything is built
        // from it.
        let body = self.redactor.redact(&f.body);
        AttemptError {
            err: classify_status(
                f.status,
                f.retry_after,
                &body,
                &self.base_url,
                &self.cfg.model,
            ),
            emitted: false,
            stop_rejected: f.status == 400 && names_stop(&body),
            grammar_rejected: f.status == 400 && names_grammar(&body),
        }
    }

    /// Turn an async-openai error into ours, keeping the HTTP status.
    pub(super) fn convert(&self, e: OpenAIError, received: usize) -> AttemptError {
        let url = self.base_url.clone();
        let err = match e {
            OpenAIError::Boxed(b) => match b.downcast::<HttpFailure>() {
                Ok(f) => return self.failure(*f),
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
                snippet: clip_bytes(&raw, 200),
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
            grammar_rejected: false,
        }
    }
}

/// The headers of a streamed request, as async-openai sends them: the key as a bearer token,
/// then the configured headers (which win).
fn stream_headers(cfg: &OpenAiConfig) -> Result<reqwest::header::HeaderMap, LlmError> {
    use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let mut auth =
        HeaderValue::from_str(&format!("Bearer {}", cfg.api_key.expose())).map_err(|_| {
            LlmError::Config("the API key holds characters a header cannot carry".into())
        })?;
    auth.set_sensitive(true);
    headers.insert(AUTHORIZATION, auth);
    for (k, v) in &cfg.headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| LlmError::Config(format!("bad header name '{k}': {e}")))?;
        let value = HeaderValue::from_str(v)
            .map_err(|e| LlmError::Config(format!("bad header '{k}': {e}")))?;
        headers.insert(name, value);
    }
    Ok(headers)
}
