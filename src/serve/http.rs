//! The HTTP side (its routes are `routes.rs`): the proxy's key, the body limit, the concurrency limit, the time
//! limit, one log line per request and optional transcripts. The answer itself is the core's
//! (`answer.rs`); requests without tools go to the upstream unchanged (`upstream.rs`).

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::clients::Clients;
use super::config::ServeConfig;
use super::core::{Core, Trace};
use super::event::keep;
use super::face::{Mode, Reading, Render};
use super::native::{Formats, NativeFormat};
use super::outbox::{self, Outbox};
use super::redact::EventRedactor;
use super::request::{Ask, parse_json};
use super::request_log::{RequestLog, log_line, log_status};
use super::response::AnswerMeta;
use super::transcript::write_transcript;
use super::upstream::Upstream;
use super::{ServeError, ServeEvent};
use crate::llm::Model;
use crate::llm::openai::OpenAiModel;
use crate::prompt::Templates;
use crate::shown::Outside;
/// The name sent upstream when neither the configuration nor the request names a model.
const DEFAULT_MODEL: &str = "default";

/// What every request shares.
pub(crate) struct Shared {
    pub(crate) cfg: ServeConfig,
    pub(crate) templates: Templates,
    pub(crate) upstream: Upstream,
    slots: Arc<Semaphore>,
    /// One upstream client per model name (one only with `--model`).
    models: Clients,
    /// The model's own tool format per model name, where serve learnt it (`native/`).
    formats: Formats,
    /// The stored Responses (`responses/store.rs`).
    pub(crate) responses: super::responses::Store,
}

impl Shared {
    /// The redactor of the upstream key.
    pub(crate) fn redactor(&self) -> &crate::secret::Redactor {
        self.upstream.redactor()
    }
}

impl Shared {
    /// What every request of `cfg` shares; fails only on a configuration that cannot work (a
    /// bad upstream URL).
    pub(crate) fn new(cfg: ServeConfig) -> Result<Arc<Shared>, ServeError> {
        crate::llm::openai::normalize_base_url(&cfg.upstream)
            .map_err(|e| ServeError::Config(e.to_string()))?;
        let limits = super::upstream::UpstreamLimits {
            pool_idle_per_host: cfg.concurrency,
            ..Default::default()
        };
        let upstream = Upstream::with_limits(
            &cfg.upstream,
            cfg.upstream_key.clone(),
            cfg.model.clone(),
            limits,
        )?;
        let responses = super::responses::open_store(&cfg)?;
        Ok(Arc::new(Shared {
            slots: Arc::new(Semaphore::new(cfg.concurrency.max(1))),
            templates: super::conversation::templates()?,
            upstream,
            models: Clients::new(),
            formats: Formats::new(),
            responses,
            cfg,
        }))
    }
}

/// Whether the request carries the proxy's key (`key.rs`).
pub(crate) fn authorised(shared: &Shared, headers: &HeaderMap) -> bool {
    super::key::carries(shared.cfg.api_key.as_ref(), headers)
}

pub(crate) async fn not_found(method: Method, uri: Uri) -> Response {
    let e = ServeError::BadRequest {
        message: format!("no route for {method} {}", uri.path()),
        param: None,
    };
    let mut r = e.into_openai();
    *r.status_mut() = StatusCode::NOT_FOUND;
    r
}

pub(crate) async fn models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let started = Instant::now();
    let response = if !authorised(&shared, &headers) {
        ServeError::Unauthorized.into_openai()
    } else {
        match take_slot(&shared) {
            Ok(_slot) => shared.upstream.models().await,
            Err(e) => e.into_openai(),
        }
    };
    log_line("GET", "/v1/models", &response, started, &Trace::default());
    response
}

/// `POST /v1/chat/completions`.
pub(crate) async fn chat(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let face = super::face::OPENAI;
    answer_route(&shared, &headers, body, &face).await
}

/// A request to a face's answering route (`/v1/chat/completions`, `/v1/messages`): admitted,
/// read by the face, answered by the core, rendered by the face; one log line.
pub(crate) async fn answer_route(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    body: Body,
    face: &super::face::Face,
) -> Response {
    let mut log = RequestLog::start();
    let response = match handle(shared, headers, body, &mut log.trace, log.started, face).await {
        Ok(r) => r,
        Err(e) => (face.error)(e),
    };
    log.end("POST", face.path, response)
}

/// `POST /v1/completions`: passed through to the upstream unchanged (no tools to answer), under
/// the same key, body and concurrency limits as a chat request.
pub(crate) async fn completions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let mut log = RequestLog::start();
    let response = match relay_completions(&shared, &headers, body, &mut log.trace).await {
        Ok(r) => r,
        Err(e) => e.into_openai(),
    };
    log.end("POST", "/v1/completions", response)
}

async fn relay_completions(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    body: Body,
    trace: &mut Trace,
) -> Result<Response, ServeError> {
    let (bytes, slot) = admit(shared, headers, body).await?;
    trace.requests = 1;
    let deadline = tokio::time::Instant::now() + shared.cfg.timeout;
    let relayed = shared.upstream.pass_through_until(true, bytes, deadline);
    Ok(hold_while_streaming(relayed.await, slot))
}

/// What every request goes through before any work: the proxy's key (401), a free slot of
/// `--concurrency` (429), then the body within `--max-body` (413) and the body time limit
/// (408). The slot is taken before the body is read, so that bodies held in memory are bounded
/// by the slots; it is held while it lives.
pub(crate) async fn admit(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    body: Body,
) -> Result<(axum::body::Bytes, OwnedSemaphorePermit), ServeError> {
    if !authorised(shared, headers) {
        return Err(ServeError::Unauthorized);
    }
    let slot = take_slot(shared)?;
    let bytes = read_body(shared, headers, body).await?;
    Ok((bytes, slot))
}

/// A free slot of `--concurrency`, or 429.
pub(crate) fn take_slot(shared: &Shared) -> Result<OwnedSemaphorePermit, ServeError> {
    shared
        .slots
        .clone()
        .try_acquire_owned()
        .map_err(|_| ServeError::Busy {
            limit: shared.cfg.concurrency,
        })
}

/// A streamed answer (`text/event-stream`) with `slot` held until its body has gone out or the
/// client went away: a passed-through stream counts against `--concurrency` while it streams.
/// A whole answer is returned as it is: its bytes are read already, and its slot is let go here.
fn hold_while_streaming(response: Response, slot: OwnedSemaphorePermit) -> Response {
    let streamed = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
    if !streamed {
        return response;
    }
    let (parts, body) = response.into_parts();
    let chunks = body.into_data_stream().map(move |chunk| {
        let _held = &slot;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(chunks))
}

/// The request body, at most `--max-body` bytes whatever the headers say (a chunked body has no
/// length): 413 beyond; all of it within the body time limit: 408 beyond.
async fn read_body(
    shared: &Shared,
    headers: &HeaderMap,
    body: Body,
) -> Result<axum::body::Bytes, ServeError> {
    let limit = shared.cfg.max_body;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ServeError::TooLarge { limit });
    }
    let within = shared.cfg.body_timeout;
    match tokio::time::timeout(within, axum::body::to_bytes(body, limit)).await {
        Ok(read) => read.map_err(|_| ServeError::TooLarge { limit }),
        Err(_) => Err(ServeError::SlowBody {
            secs: within.as_secs(),
        }),
    }
}

async fn handle(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    body: Body,
    trace: &mut Trace,
    started: Instant,
    face: &super::face::Face,
) -> Result<Response, ServeError> {
    let (bytes, slot) = admit(shared, headers, body).await?;
    let deadline = tokio::time::Instant::now() + shared.cfg.timeout;
    let read = read_request(bytes.clone(), slot, face, shared.cfg.api);
    let (reading, slot) = within(shared, deadline, read).await?;
    let (ask, mode, render) = match reading {
        Reading::PassThrough => {
            trace.requests = 1;
            let relayed = shared.upstream.pass_through_until(false, bytes, deadline);
            return Ok(hold_while_streaming(relayed.await, slot));
        }
        Reading::Answer { ask, mode, render } => (*ask, mode, render),
    };
    let live = Live {
        deadline,
        slot,
        started,
    };
    core_answer(shared, ask, mode, render, trace, live, face.path).await
}

/// `work` by the request's `deadline` (`--timeout`), or 504 (a relay, the core bound their own).
pub(crate) async fn within<T>(
    shared: &Shared,
    deadline: tokio::time::Instant,
    work: impl Future<Output = Result<T, ServeError>>,
) -> Result<T, ServeError> {
    let late = ServeError::Timeout {
        secs: shared.cfg.timeout.as_secs(),
    };
    let answered = tokio::time::timeout_at(deadline, work).await;
    answered.unwrap_or(Err(late))
}

/// The body read as JSON and by the face (a pass-through, or an answer with its schemas
/// compiled). On a blocking thread, since compiling a schema's patterns is CPU work that must
/// not stall other clients' requests; the closure holds the request's slot, so that no more
/// than `--concurrency` requests compile at once, even past a time limit.
async fn read_request(
    bytes: axum::body::Bytes,
    slot: OwnedSemaphorePermit,
    face: &super::face::Face,
    api: crate::llm::Api,
) -> Result<(Reading, OwnedSemaphorePermit), ServeError> {
    let read = face.read;
    let (reading, slot) = tokio::task::spawn_blocking(move || {
        let reading = parse_json(&bytes).and_then(|value| read(&value, api));
        (reading, slot)
    })
    .await
    .map_err(|_| ServeError::Config("reading the request failed".into()))?;
    Ok((reading?, slot))
}

/// The upstream client for a request's model name.
pub(crate) fn model_for(
    shared: &Shared,
    requested: Option<&str>,
) -> Result<Arc<OpenAiModel>, ServeError> {
    let name = shared
        .cfg
        .model
        .as_deref()
        .or(requested)
        .unwrap_or(DEFAULT_MODEL);
    shared.models.get(&shared.cfg, name)
}

/// The model's own tool format for a request the core answers with tools, where
/// `--tool-format` and the upstream's chat template allow it.
async fn native_for(
    shared: &Shared,
    ask: &Ask,
    mode: &Mode,
) -> Result<Option<Arc<NativeFormat>>, ServeError> {
    if *mode != Mode::Core || ask.tools.is_empty() {
        return Ok(None);
    }
    let name = shared
        .cfg
        .model
        .as_deref()
        .or(ask.model.as_deref())
        .unwrap_or(DEFAULT_MODEL);
    shared.formats.get(&shared.cfg, &shared.models, name).await
}

/// The answer's identity: a new id (the face's prefix), the model name given back, the time.
/// The id is time-ordered (a UUID v7, ordered by creation within the process): the Responses
/// store drops the oldest records first by the second they were made and then by id
/// (`responses/store/`), and a random id would let a younger record of the same second go
/// before an older one.
fn answer_meta(shared: &Shared, ask: &Ask, render: &dyn Render) -> AnswerMeta {
    AnswerMeta {
        id: format!("{}{}", render.id_prefix(), uuid::Uuid::now_v7().simple()),
        model: ask
            .model
            .clone()
            .or_else(|| shared.cfg.model.clone())
            .unwrap_or_else(|| DEFAULT_MODEL.into()),
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    }
}

/// What the core needs besides the request: the upstream `model`, its `native` tool format when
/// serve asks in it, and the rest from the server's settings.
fn core_for<'a>(
    shared: &'a Shared,
    model: &'a dyn Model,
    native: Option<Arc<NativeFormat>>,
) -> Core<'a> {
    Core {
        model,
        api: shared.cfg.api,
        templates: &shared.templates,
        repairs: shared.cfg.repairs,
        redactor: shared.upstream.redactor(),
        native,
        guess_timeout: shared.cfg.guess_timeout,
        thought: shared.cfg.thought,
        policies: shared.cfg.policies,
    }
}

/// A request for the core: the whole answer (events collected), or the streamed one.
pub(crate) async fn core_answer(
    shared: &Arc<Shared>,
    ask: Ask,
    mode: Mode,
    render: Arc<dyn Render>,
    trace: &mut Trace,
    live: Live,
    path: &'static str,
) -> Result<Response, ServeError> {
    let model = model_for(shared, ask.model.as_deref())?;
    let native = within(shared, live.deadline, native_for(shared, &ask, &mode)).await?;
    if ask.stream {
        let answer = Answering {
            model,
            native,
            ask,
            mode,
            render,
            path,
        };
        return stream_answer(shared.clone(), answer, trace, live).await;
    }
    let core = core_for(shared, model.as_ref(), native);
    let mut events: Vec<ServeEvent> = Vec::new();
    let redactor = shared.upstream.redactor();
    let mut redact = EventRedactor::new(redactor);
    let mut emit = |e| {
        for e in redact.pass(e) {
            keep(&mut events, e);
        }
    };
    let result = within(
        shared,
        live.deadline,
        mode.answer(&core, &ask, &mut emit, trace),
    )
    .await;
    for e in redact.finish() {
        keep(&mut events, e);
    }
    let meta = answer_meta(shared, &ask, render.as_ref());
    let whole = render.whole(&meta, &events);
    if let Some(dir) = &shared.cfg.session_dir {
        let error = result.as_ref().err();
        write_transcript(dir, &meta, &whole, trace, error, redactor).await;
    }
    result?;
    if let Some(settling) = render.settle(&whole) {
        settling.await;
    }
    Ok((StatusCode::OK, axum::Json(whole)).into_response())
}

/// A streamed answer's work, which its task takes over.
struct Answering {
    model: Arc<OpenAiModel>,
    native: Option<Arc<NativeFormat>>,
    ask: Ask,
    mode: Mode,
    render: Arc<dyn Render>,
    path: &'static str,
}

/// What a streamed answer's task takes over from the request: its deadline, its concurrency
/// slot, and when the request began (for its log line).
pub(crate) struct Live {
    deadline: tokio::time::Instant,
    slot: OwnedSemaphorePermit,
    started: Instant,
}

impl Live {
    /// A request's deadline, its slot, and when it began.
    pub(crate) fn new(
        deadline: tokio::time::Instant,
        slot: OwnedSemaphorePermit,
        started: Instant,
    ) -> Live {
        Live {
            deadline,
            slot,
            started,
        }
    }
}

/// A streamed answer: the core runs in its own task and each event goes to the client as the
/// core emits it (an answer's text while the upstream still writes it, see `live.rs`).
///
/// The response waits for the first event: a core that fails before it (no usable turn within
/// the repairs, an upstream that fails) still gets its HTTP error, as a whole answer would.
/// After it, the status is sent; a failure then ends the stream with OpenAI's error event
/// (`chunks.rs`). The task keeps the request's concurrency slot and deadline, writes the
/// transcript and the request's log line when it ends, and stops (dropping the upstream
/// request) as soon as the client goes away.
async fn stream_answer(
    shared: Arc<Shared>,
    answering: Answering,
    trace: &mut Trace,
    live: Live,
) -> Result<Response, ServeError> {
    // What the task takes over, and what the response keeps.
    let Answering {
        model,
        native,
        ask,
        mode,
        ..
    } = answering;
    let (render, path) = (answering.render, answering.path);
    let meta = answer_meta(&shared, &ask, render.as_ref());
    let stream_meta = meta.clone();
    let task_render = render.clone();
    // Bounded: the work waits for a client that reads slowly (`outbox.rs`).
    let (tx, mut rx) = tokio::sync::mpsc::channel::<ServeEvent>(outbox::BUFFER);
    let (failed_tx, failed_rx) = tokio::sync::oneshot::channel::<(ServeError, Trace)>();
    tokio::spawn(async move {
        let Live {
            deadline,
            slot,
            started,
        } = live;
        let _slot = slot;
        let core = core_for(&shared, model.as_ref(), native);
        let keep_all = shared.cfg.session_dir.is_some();
        let mut kept: Vec<ServeEvent> = Vec::new();
        let mut sent = 0usize;
        let mut trace = Trace::default();
        let redactor = shared.upstream.redactor();
        // The upstream key is taken out of every event before it is sent or kept.
        let mut redact = EventRedactor::new(redactor);
        let outbox = Outbox::default();
        let gone = || ServeError::Upstream {
            reason: "the client went away".into(),
        };
        let late = || ServeError::Timeout {
            secs: shared.cfg.timeout.as_secs(),
        };
        let mut send = |e: ServeEvent| {
            if keep_all {
                keep(&mut kept, e.clone());
            }
            sent += 1;
            outbox.put(e);
        };
        let result = {
            let mut emit = |e: ServeEvent| redact.pass(e).into_iter().for_each(&mut send);
            let work = mode.answer(&core, &ask, &mut emit, &mut trace);
            let driven = outbox.drive(work, &tx);
            tokio::select! {
                r = tokio::time::timeout_at(deadline, driven) => match r {
                    Ok(Ok(answered)) => answered,
                    Ok(Err(outbox::Gone)) => Err(gone()),
                    Err(_) => Err(late()),
                },
                () = tx.closed() => Err(gone()),
            }
        };
        // An answer broken off still gets the text that was held back.
        redact.finish().into_iter().for_each(&mut send);
        // What the work's last step emitted, by the same deadline.
        let flushed = tokio::time::timeout_at(deadline, outbox.flush(&tx)).await;
        let result = match (result, flushed) {
            (Ok(()), Err(_)) => Err(late()),
            (Ok(()), Ok(Err(outbox::Gone))) => Err(gone()),
            (result, _) => result,
        };
        if let Some(dir) = &shared.cfg.session_dir {
            let whole = task_render.whole(&meta, &kept);
            let error = result.as_ref().err();
            write_transcript(dir, &meta, &whole, &trace, error, redactor).await;
        }
        match result {
            Err(e) if sent == 0 => {
                // The handler answers with the error and logs the request.
                let _ = failed_tx.send((e, trace));
            }
            result => {
                if let Err(e) = &result {
                    tracing::warn!(error = %Outside(e), "a streamed answer was broken off");
                }
                log_status("POST", path, 200, started, &trace);
            }
        }
    });
    let Some(first) = rx.recv().await else {
        return Err(match failed_rx.await {
            Ok((e, t)) => {
                *trace = t;
                e
            }
            Err(_) => ServeError::Upstream {
                reason: "the answer's task ended without an answer".into(),
            },
        });
    };
    trace.logged = true;
    let rest =
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) });
    let events = futures::stream::once(async move { first }).chain(rest);
    Ok(render.stream(stream_meta, Box::pin(events)))
}
