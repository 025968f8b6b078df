//! A fake OpenAI-compatible server for tests: axum on `127.0.0.1:0`, `/v1/chat/completions` and
//! `/v1/completions`, streamed (SSE, cut into small byte chunks so events and even UTF-8
//! characters are split across reads) or whole.
//!
//! ```ignore
//! mod common;
//! use common::fake_server::{FakeConfig, FakeServer, StopMode};
//!
//! let server = FakeServer::start(FakeConfig::turns(["<thought>hi</thought><final_answer>1</final_answer>"])).await;
//! // point the client at server.base_url ("http://127.0.0.1:PORT/v1")
//! let bodies = server.requests(); // what was sent: stop list, stream flag, max_tokens, ...
//! ```
//!
//! Each successful request consumes the next scripted turn (`default_reply` once they run out);
//! failed requests (500, 429, 400, 404, 401) do not, so a retry gets the same turn. Switches:
//!
//! | field | behaviour |
//! |---|---|
//! | `stop_mode` | `Strip` (OpenAI, vLLM), `Keep` (TGI), `Ignore` (MLX; runs past stops), `Reject` (400 naming `stop` when stops are sent), `FlushPartial` (llama.cpp: strips the stop but sends half of it first) |
//! | `empty_finish_reason` | `finish_reason: ""` on every non-final chunk (old Ollama, sglang) |
//! | `missing_ids` | no `id`, `object`, `created`, `model` |
//! | `fail_first` | answer `500` to the first N requests |
//! | `rate_limit_first`, `retry_after` | then `429` (llama.cpp-shaped body) with a `Retry-After` header |
//! | `first_byte_delay`, `chunk_delay` | sleep before the first body byte / between chunks |
//! | `cut_after_events` | abort the connection after N content events (stream cut mid-way) |
//! | `malformed_json` | one broken event (stream) or a broken body (whole) |
//! | `empty_choices` | `choices: []` |
//! | `known_models` | other model names get `404` with an Ollama-shaped body (`{"error":"…"}`) |
//! | `require_key` | `401` unless `Authorization: Bearer KEY` |
//! | `reasoning` | sent first as `reasoning_content` deltas |
//! | `stop_reason` | vLLM-style `stop_reason` naming the stop that fired |
//! | `props` | answer `GET /props` as llama.cpp does |
//! | `owned_by` | answer `GET /v1/models` with this `owned_by` (vLLM, SGLang, Ollama's `library`) |
//! | `served_models` | the ids `GET /v1/models` lists (default: `fake-model`) |
//! | `reject_grammar` | `400` naming the field when a request carries a grammar |
//! | `reject_prefill` | `400` to a chat that ends in an assistant message (an older llama.cpp under a thinking template) |
//! | `ignore_max_tokens` | send the whole turn whatever the token limit (a server that runs on) |
//! | `props_padding` | pad the llama.cpp `/props` answer with this many bytes (an oversized probe answer) |
//! | `chat_template` | the `chat_template` the `/props` answer carries |
//! | `huge_body` | answer every completion request with this status and this many bytes of body, streamed |
//! | `props_n_ctx` | the window (`n_ctx`) `/props` reports (default 8192) |
//! | `max_model_len` | `GET /v1/models` entries carry it (vLLM, SGLang) |
//! | `ollama` | answer `GET /api/ps` and `POST /api/show` as Ollama does ([`FakeOllama`]) |
//! | `tokenizer` | answer `POST /tokenize` (and `/apply-template`) as llama.cpp does, or as vLLM does when `owned_by` is `vllm` (1 token per 4 bytes; a chat's template is `<\|role\|>\ncontent\n` per message, then `<\|assistant\|>\n`) |
//! | `context_error` | refuse every completion request as this server refuses a prompt over its window ([`ContextShape`]) |
//! | `by_content` | pick the reply by what the prompt contains (first needle found wins), whatever the order of requests |
//! | `enforce_window` | refuse, with llama.cpp's 400 (`exceed_context_size_error`), a completion request whose prompt ([`FakeServer::prompt_tokens`]: the fake tokenizer's count of the chat template or the completions text) plus `max_tokens` exceeds `props_n_ctx`; answers report that count as `prompt_tokens` |
//! | `tokenize_percent` | `/tokenize` answers this percentage of the true count (default 100; below: a tokenizer, and so an estimate, that is off) |
//!
//! `max_tokens` / `max_completion_tokens` are honoured roughly (4 bytes per token, then
//! `finish_reason: "length"`). `aborted()` counts streams the client dropped before the end.
//! Requests to the root's own endpoints (`/tokenize`, `/apply-template`, `/api/*`) are kept apart
//! in `root_requests()`; `probes()` counts `/props`, `/v1/models` and Ollama's `/api/ps`, `/api/show`.
//! `sequence()` lists the paths of completion and root requests in the order they came, and
//! `refused()` the requests `enforce_window` refused.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use serde_json::{Value, json};

/// What the server does with the request's `stop` strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StopMode {
    /// Stop at the first stop string and leave it out (OpenAI, vLLM).
    #[default]
    Strip,
    /// Stop at it and keep it in the text (TGI).
    Keep,
    /// Ignore `stop`: send the whole turn.
    Ignore,
    /// Reject a request that has `stop` with a 400 naming it (OpenAI reasoning models).
    Reject,
    /// Strip it, but flush half of the stop string first (llama.cpp streaming bug).
    FlushPartial,
}

/// What Ollama's own endpoints say of a model's window.
#[derive(Debug, Clone, Default)]
pub struct FakeOllama {
    /// `model_info.<arch>.context_length` in `/api/show` (what the model could take).
    pub model_context: u64,
    /// A `num_ctx` line in `/api/show`'s `parameters`.
    pub num_ctx: Option<u64>,
    /// The model is loaded with this `context_length` (`/api/ps`); `None`: nothing loaded.
    pub loaded: Option<u64>,
}

/// How a server refuses a prompt over its window (`context_error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextShape {
    /// llama.cpp: 400, `exceed_context_size_error`, `n_prompt_tokens` 3000 and `n_ctx` 2048.
    LlamaCpp,
    /// vLLM: 400, "maximum context length is 2048 tokens. However, you requested 3000 tokens…".
    Vllm,
    /// SGLang: 400, "The input (3000 tokens) is longer than the model's context length (2048 tokens)".
    Sglang,
    /// OpenAI: 400, `context_length_exceeded`, "…maximum context length is 2048 tokens. However,
    /// your messages resulted in 3000 tokens…".
    OpenAi,
    /// llama.cpp's refusal inside a 200 stream (an `error` event), for a streamed request; a
    /// whole one gets the 400.
    InBand,
}

impl ContextShape {
    /// The error object the server sends.
    fn error(self) -> Value {
        match self {
            ContextShape::LlamaCpp | ContextShape::InBand => {
                json!({"error": {"code": 400, "message": "request (3000 tokens) exceeds the available context size (2048 tokens), try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 3000, "n_ctx": 2048}})
            }
            ContextShape::Vllm => {
                json!({"object": "error", "message": "This model's maximum context length is 2048 tokens. However, you requested 3000 tokens (2000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.", "type": "BadRequestError", "param": null, "code": 400})
            }
            ContextShape::Sglang => {
                json!({"object": "error", "message": "The input (3000 tokens) is longer than the model's context length (2048 tokens).", "type": "BadRequestError", "param": null, "code": 400})
            }
            ContextShape::OpenAi => {
                json!({"error": {"message": "This model's maximum context length is 2048 tokens. However, your messages resulted in 3000 tokens. Please reduce the length of the messages.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})
            }
        }
    }
}

/// How the fake server behaves.
#[derive(Debug, Clone)]
pub struct FakeConfig {
    /// Replies in order, one per successful request.
    pub turns: Vec<String>,
    /// Reply once the turns run out.
    pub default_reply: String,
    /// Reasoning sent as `reasoning_content` before the text.
    pub reasoning: Option<String>,
    /// Stop handling.
    pub stop_mode: StopMode,
    /// Send vLLM's `stop_reason` with the stop string.
    pub stop_reason: bool,
    /// SSE body bytes per write.
    pub chunk_bytes: usize,
    /// Characters per content delta ("token").
    pub token_chars: usize,
    /// `finish_reason: ""` on non-final chunks.
    pub empty_finish_reason: bool,
    /// Leave out `id`, `object`, `created`, `model`.
    pub missing_ids: bool,
    /// Answer 500 to the first N requests.
    pub fail_first: usize,
    /// Then answer 429 to the next N requests.
    pub rate_limit_first: usize,
    /// `Retry-After` value (seconds) on 429s.
    pub retry_after: Option<String>,
    /// Pause before the first body byte.
    pub first_byte_delay: Duration,
    /// Pause between body chunks.
    pub chunk_delay: Duration,
    /// Abort the connection after this many content events.
    pub cut_after_events: Option<usize>,
    /// One malformed event (stream) or a malformed body (whole).
    pub malformed_json: bool,
    /// `choices: []`.
    pub empty_choices: bool,
    /// When not empty, other model names get 404.
    pub known_models: Vec<String>,
    /// When set, requests without this bearer key get 401.
    pub require_key: Option<String>,
    /// Pick the reply by the step the request is at (the number of `<observation>` blocks in its
    /// prompt) instead of in arrival order, so many concurrent episodes each get their own script.
    pub by_step: bool,
    /// Answer `GET /props` as llama.cpp does.
    pub props: bool,
    /// Answer `GET /v1/models` with this `owned_by`.
    pub owned_by: Option<String>,
    /// The ids `GET /v1/models` lists; `None` lists `fake-model`.
    pub served_models: Option<Vec<String>>,
    /// Refuse a request with a grammar (`grammar`, `structured_outputs`, `ebnf`) with a 400
    /// naming the field.
    pub reject_grammar: bool,
    /// Refuse a chat whose last message is the assistant's (prefill) with llama.cpp's 400.
    pub reject_prefill: bool,
    /// Send the whole turn whatever `max_tokens` says.
    pub ignore_max_tokens: bool,
    /// Bytes of padding in the `/props` answer (with `props`).
    pub props_padding: usize,
    /// The `chat_template` the `/props` answer carries (with `props`).
    pub chat_template: Option<String>,
    /// Answer every completion request with this status and this many bytes of body (`x`s),
    /// streamed in 64 KiB pieces; `aborted()` counts it when the client hangs up before the end.
    pub huge_body: Option<(u16, usize)>,
    /// The window `/props` reports as `default_generation_settings.n_ctx`.
    pub props_n_ctx: u64,
    /// `max_model_len` on every `/v1/models` entry.
    pub max_model_len: Option<u64>,
    /// Answer Ollama's `/api/ps` and `/api/show`.
    pub ollama: Option<FakeOllama>,
    /// Answer `/tokenize` and `/apply-template` (404 otherwise).
    pub tokenizer: bool,
    /// Refuse every completion request as a prompt over the window.
    pub context_error: Option<ContextShape>,
    /// `(needle, reply)` pairs: a request whose prompt text (the messages' contents, or the
    /// completions prompt) contains a needle gets that reply, the first pair found winning;
    /// others fall back to `turns` / `default_reply`. For a proxy in front of this server whose
    /// prompt layout the test does not fix: the reply follows what the conversation holds (a
    /// tool's result, a word of the question), not how many requests came before or in what
    /// words the proxy framed them.
    pub by_content: Vec<(String, String)>,
    /// Refuse a completion request whose prompt tokens ([`FakeServer::prompt_tokens`]) plus its
    /// `max_tokens` exceed `props_n_ctx`, with llama.cpp's 400 and its numbers; answers report
    /// the same count as `prompt_tokens` (as llama.cpp does).
    pub enforce_window: bool,
    /// `/tokenize` answers this percentage of the count `enforce_window` uses (100: the same).
    pub tokenize_percent: u64,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            turns: Vec::new(),
            default_reply: "<final_answer>ok</final_answer>".to_owned(),
            reasoning: None,
            stop_mode: StopMode::Strip,
            stop_reason: false,
            chunk_bytes: 7,
            token_chars: 3,
            empty_finish_reason: false,
            missing_ids: false,
            fail_first: 0,
            rate_limit_first: 0,
            retry_after: None,
            first_byte_delay: Duration::ZERO,
            chunk_delay: Duration::ZERO,
            cut_after_events: None,
            malformed_json: false,
            empty_choices: false,
            known_models: Vec::new(),
            require_key: None,
            by_step: false,
            props: false,
            owned_by: None,
            served_models: None,
            reject_grammar: false,
            reject_prefill: false,
            ignore_max_tokens: false,
            props_padding: 0,
            chat_template: None,
            huge_body: None,
            props_n_ctx: 8192,
            max_model_len: None,
            ollama: None,
            tokenizer: false,
            context_error: None,
            by_content: Vec::new(),
            enforce_window: false,
            tokenize_percent: 100,
        }
    }
}

impl FakeConfig {
    /// Defaults with these scripted turns.
    pub fn turns<I, S>(turns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        FakeConfig {
            turns: turns.into_iter().map(Into::into).collect(),
            ..FakeConfig::default()
        }
    }
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// `/v1/chat/completions` or `/v1/completions`.
    pub path: String,
    /// The JSON body (`Value::Null` if it was not JSON).
    pub body: Value,
    /// The `Authorization` header.
    pub authorization: Option<String>,
    /// Every header's name (lowercase), to check what a client adds.
    pub header_names: Vec<String>,
}

impl RecordedRequest {
    /// The `stop` strings sent (empty when none).
    pub fn stops(&self) -> Vec<String> {
        match &self.body["stop"] {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The `stream` flag.
    pub fn stream(&self) -> bool {
        self.body["stream"].as_bool().unwrap_or(false)
    }
}

struct Inner {
    cfg: FakeConfig,
    requests: Mutex<Vec<RecordedRequest>>,
    next_turn: AtomicUsize,
    aborted: AtomicUsize,
    completed: AtomicUsize,
    probes: AtomicUsize,
    model_lists: Mutex<Vec<Option<String>>>,
    root_requests: Mutex<Vec<RecordedRequest>>,
    /// Paths of completion and root requests, in arrival order.
    sequence: Mutex<Vec<String>>,
    /// Requests refused by `enforce_window`.
    refused: AtomicUsize,
}

/// A running fake server; stops when dropped.
pub struct FakeServer {
    /// `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeServer {
    /// Start on a free loopback port (needs a tokio runtime).
    pub async fn start(cfg: FakeConfig) -> FakeServer {
        let inner = Arc::new(Inner {
            cfg,
            requests: Mutex::new(Vec::new()),
            next_turn: AtomicUsize::new(0),
            aborted: AtomicUsize::new(0),
            completed: AtomicUsize::new(0),
            probes: AtomicUsize::new(0),
            model_lists: Mutex::new(Vec::new()),
            root_requests: Mutex::new(Vec::new()),
            sequence: Mutex::new(Vec::new()),
            refused: AtomicUsize::new(0),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .route("/v1/completions", post(handle))
            .route("/props", get(props))
            .route("/v1/models", get(models))
            .route("/tokenize", post(tokenize))
            .route("/apply-template", post(apply_template))
            .route("/api/ps", get(ollama_ps))
            .route("/api/show", post(ollama_show))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        // TCP_NODELAY: small SSE writes must not wait for delayed ACKs (40 ms stalls).
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeServer {
            base_url: format!("http://{addr}/v1"),
            inner,
            task,
        }
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.inner
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// Number of requests received.
    pub fn request_count(&self) -> usize {
        self.inner.requests.lock().map(|r| r.len()).unwrap_or(0)
    }

    /// Turns served so far.
    pub fn turns_served(&self) -> usize {
        self.inner.next_turn.load(Ordering::SeqCst)
    }

    /// Streams the client dropped before the server finished writing them.
    pub fn aborted(&self) -> usize {
        self.inner.aborted.load(Ordering::SeqCst)
    }

    /// `GET /props` and `GET /v1/models` requests received.
    pub fn probes(&self) -> usize {
        self.inner.probes.load(Ordering::SeqCst)
    }

    /// The `Authorization` header of each `GET /v1/models` received, in order.
    pub fn model_lists(&self) -> Vec<Option<String>> {
        self.inner
            .model_lists
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// Streams written to the end.
    pub fn completed(&self) -> usize {
        self.inner.completed.load(Ordering::SeqCst)
    }

    /// Requests to the root's own endpoints (`/tokenize`, `/apply-template`, `/api/ps`,
    /// `/api/show`), in order.
    pub fn root_requests(&self) -> Vec<RecordedRequest> {
        self.inner
            .root_requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// The paths of every completion request and root request (`/v1/chat/completions`,
    /// `/tokenize`, …), in the order they arrived: which requests a count came before.
    pub fn sequence(&self) -> Vec<String> {
        self.inner
            .sequence
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// Completion requests refused by `enforce_window` as over the window.
    pub fn refused(&self) -> usize {
        self.inner.refused.load(Ordering::SeqCst)
    }

    /// The fake's true count of a completion request's prompt: [`fake_tokens`] of its chat
    /// template (`messages`) or of its completions text (`prompt`). What `enforce_window`
    /// enforces, and what `/tokenize` answers (at `tokenize_percent`).
    pub fn prompt_tokens(body: &Value) -> u64 {
        match body["prompt"].as_str() {
            Some(text) => fake_tokens(text),
            None => fake_tokens(&fake_template(&body["messages"])),
        }
    }
}

/// Note a request's path in the arrival order.
fn record_sequence(inner: &Inner, path: &str) {
    if let Ok(mut seq) = inner.sequence.lock() {
        seq.push(path.to_owned());
    }
}

/// Keep a request to one of the root's own endpoints; its JSON body (`Null` if none).
fn record_root(inner: &Inner, path: &str, headers: &HeaderMap, body: &Bytes) -> Value {
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    record_sequence(inner, path);
    if let Ok(mut reqs) = inner.root_requests.lock() {
        reqs.push(RecordedRequest {
            path: path.to_owned(),
            body: body.clone(),
            authorization: headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            header_names: headers.keys().map(|k| k.as_str().to_owned()).collect(),
        });
    }
    body
}

/// The fake chat template: `<|role|>\ncontent\n` per message, then the assistant's opening.
fn fake_template(messages: &Value) -> String {
    let mut out = String::new();
    for m in messages.as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("user");
        let content = m["content"].as_str().unwrap_or("");
        out.push_str(&format!("<|{role}|>\n{content}\n"));
    }
    out.push_str("<|assistant|>\n");
    out
}

/// The fake tokenizer's count: one token per 4 bytes, rounded up.
pub fn fake_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

async fn tokenize(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> Response {
    let body = record_root(&inner, "/tokenize", &headers, &body);
    if !inner.cfg.tokenizer {
        return json_response(StatusCode::NOT_FOUND, "{\"error\":\"not found\"}".into());
    }
    let text = match (&body["content"], &body["prompt"]) {
        (Value::String(c), _) | (_, Value::String(c)) => c.clone(),
        _ => fake_template(&body["messages"]),
    };
    let n = fake_tokens(&text) * inner.cfg.tokenize_percent / 100;
    let ids: Vec<u64> = (0..n).map(|i| 1000 + i % 50_000).collect();
    let answer = if inner.cfg.owned_by.as_deref() == Some("vllm") {
        json!({"count": n, "max_model_len": inner.cfg.max_model_len, "tokens": ids})
    } else {
        json!({ "tokens": ids })
    };
    json_response(StatusCode::OK, answer.to_string())
}

async fn apply_template(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body = record_root(&inner, "/apply-template", &headers, &body);
    if !inner.cfg.tokenizer {
        return json_response(StatusCode::NOT_FOUND, "{\"error\":\"not found\"}".into());
    }
    json_response(
        StatusCode::OK,
        json!({ "prompt": fake_template(&body["messages"]) }).to_string(),
    )
}

async fn ollama_ps(State(inner): State<Arc<Inner>>, headers: HeaderMap) -> Response {
    inner.probes.fetch_add(1, Ordering::SeqCst);
    record_root(&inner, "/api/ps", &headers, &Bytes::new());
    let Some(ollama) = &inner.cfg.ollama else {
        return json_response(StatusCode::NOT_FOUND, "404 page not found".into());
    };
    let models: Vec<Value> = ollama
        .loaded
        .iter()
        .map(|n| json!({"name": "fake-model:latest", "model": "fake-model:latest", "size": 1, "context_length": n}))
        .collect();
    json_response(StatusCode::OK, json!({ "models": models }).to_string())
}

async fn ollama_show(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> Response {
    inner.probes.fetch_add(1, Ordering::SeqCst);
    record_root(&inner, "/api/show", &headers, &body);
    let Some(ollama) = &inner.cfg.ollama else {
        return json_response(StatusCode::NOT_FOUND, "404 page not found".into());
    };
    let mut parameters = "stop \"<|im_end|>\"".to_owned();
    if let Some(n) = ollama.num_ctx {
        parameters.push_str(&format!("\nnum_ctx                        {n}"));
    }
    json_response(
        StatusCode::OK,
        json!({"parameters": parameters, "model_info": {"general.architecture": "fake", "fake.context_length": ollama.model_context}}).to_string(),
    )
}

async fn props(State(inner): State<Arc<Inner>>) -> Response {
    inner.probes.fetch_add(1, Ordering::SeqCst);
    if !inner.cfg.props {
        return json_response(StatusCode::NOT_FOUND, "{\"error\":\"not found\"}".into());
    }
    json_response(
        StatusCode::OK,
        json!({"default_generation_settings": {"n_ctx": inner.cfg.props_n_ctx}, "total_slots": 1, "model_path": "m.gguf", "padding": "x".repeat(inner.cfg.props_padding), "chat_template": inner.cfg.chat_template, "bos_token": "", "eos_token": "<|im_end|>"}).to_string(),
    )
}

async fn models(State(inner): State<Arc<Inner>>, headers: HeaderMap) -> Response {
    inner.probes.fetch_add(1, Ordering::SeqCst);
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Ok(mut lists) = inner.model_lists.lock() {
        lists.push(auth);
    }
    let owner = inner
        .cfg
        .owned_by
        .clone()
        .unwrap_or_else(|| "organization-owner".into());
    json_response(
        StatusCode::OK,
        json!({"object": "list", "data": inner
            .cfg
            .served_models
            .clone()
            .unwrap_or_else(|| vec!["fake-model".into()])
            .iter()
            .map(|id| match inner.cfg.max_model_len {
                Some(n) => json!({"id": id, "object": "model", "owned_by": owner, "max_model_len": n}),
                None => json!({"id": id, "object": "model", "owned_by": owner}),
            })
            .collect::<Vec<_>>()})
        .to_string(),
    )
}

fn json_response(status: StatusCode, body: String) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap_or_default()
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let cfg = &inner.cfg;
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let path = uri.path().to_owned();
    let index = {
        let mut reqs = inner.requests.lock().unwrap_or_else(|e| e.into_inner());
        reqs.push(RecordedRequest {
            path: path.clone(),
            body: body.clone(),
            authorization: authorization.clone(),
            header_names: headers.keys().map(|k| k.as_str().to_owned()).collect(),
        });
        reqs.len() - 1
    };
    record_sequence(&inner, &path);
    let chat = path.ends_with("/chat/completions");
    if let Some((status, bytes)) = cfg.huge_body {
        return huge_body(&inner, status, bytes);
    }

    if let Some(key) = &cfg.require_key
        && authorization.as_deref() != Some(format!("Bearer {key}").as_str())
    {
        return json_response(
            StatusCode::UNAUTHORIZED,
            json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}).to_string(),
        );
    }
    let model = body["model"].as_str().unwrap_or("").to_owned();
    if !cfg.known_models.is_empty() && !cfg.known_models.contains(&model) {
        return json_response(
            StatusCode::NOT_FOUND,
            json!({"error": format!("model \"{model}\" not found, try pulling it first")})
                .to_string(),
        );
    }
    if index < cfg.fail_first {
        return Response::builder()
            .status(StatusCode::INTERNAL_SERVER_ERROR)
            .header("content-type", "text/plain")
            .body(Body::from("Internal Server Error: the model crashed"))
            .unwrap_or_default();
    }
    if index < cfg.fail_first + cfg.rate_limit_first {
        let mut b = Response::builder()
            .status(StatusCode::TOO_MANY_REQUESTS)
            .header("content-type", "application/json");
        if let Some(ra) = &cfg.retry_after {
            b = b.header("retry-after", ra.as_str());
        }
        return b
            .body(Body::from(json!({"error": {"code": 429, "message": "server busy", "type": "unavailable_error"}}).to_string()))
            .unwrap_or_default();
    }
    if let Some(shape) = cfg.context_error {
        if shape == ContextShape::InBand && body["stream"].as_bool() == Some(true) {
            return Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "text/event-stream")
                .body(Body::from(format!(
                    "data: {}\n\ndata: [DONE]\n\n",
                    shape.error()
                )))
                .unwrap_or_default();
        }
        return json_response(StatusCode::BAD_REQUEST, shape.error().to_string());
    }
    let max_tokens = body["max_tokens"]
        .as_u64()
        .or_else(|| body["max_completion_tokens"].as_u64());
    let true_tokens = FakeServer::prompt_tokens(&body);
    if cfg.enforce_window && true_tokens + max_tokens.unwrap_or(0) > cfg.props_n_ctx {
        // llama.cpp's words and fields (server-common: `exceed_context_size_error`).
        inner.refused.fetch_add(1, Ordering::SeqCst);
        let n_ctx = cfg.props_n_ctx;
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": {"code": 400, "message": format!("request ({true_tokens} tokens) exceeds the available context size ({n_ctx} tokens), try increasing it"), "type": "exceed_context_size_error", "n_prompt_tokens": true_tokens, "n_ctx": n_ctx}}).to_string(),
        );
    }
    let stops: Vec<String> = match &body["stop"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    if cfg.reject_grammar
        && let Some(field) = ["grammar", "structured_outputs", "ebnf"]
            .into_iter()
            .find(|f| body.get(*f).is_some())
    {
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": format!("Unrecognized request argument supplied: {field}"), "type": "invalid_request_error", "param": field}}).to_string(),
        );
    }
    let last_role = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(|m| m["role"].clone());
    if cfg.reject_prefill && last_role.is_some_and(|r| r == "assistant") {
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": {"code": 400, "message": "Assistant response prefill is incompatible with enable_thinking.", "type": "invalid_request_error"}}).to_string(),
        );
    }
    if cfg.stop_mode == StopMode::Reject && !stops.is_empty() {
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": "Unsupported parameter: 'stop' is not supported with this model.", "type": "invalid_request_error", "param": "stop", "code": "unsupported_parameter"}}).to_string(),
        );
    }

    let matched = cfg.by_content.iter().find_map(|(needle, reply)| {
        prompt_text(&body)
            .contains(needle.as_str())
            .then(|| reply.clone())
    });
    let turn = if matched.is_some() {
        usize::MAX // not a scripted turn: `turns` stays where it was
    } else if cfg.by_step {
        let prompt = if chat {
            body["messages"].as_array().map(|m| {
                m.iter()
                    .filter_map(|m| m["content"].as_str())
                    .collect::<String>()
            })
        } else {
            body["prompt"].as_str().map(str::to_owned)
        };
        // Observations after the task (the system prompt's examples mention the tags too).
        let prompt = prompt.unwrap_or_default();
        let after_task = prompt
            .rfind("</question>")
            .map_or(&prompt[..], |i| &prompt[i..]);
        after_task.matches("<observation>").count()
    } else {
        inner.next_turn.fetch_add(1, Ordering::SeqCst)
    };
    let text = matched.unwrap_or_else(|| {
        cfg.turns
            .get(turn)
            .cloned()
            .unwrap_or_else(|| cfg.default_reply.clone())
    });
    let (mut content, mut finish, fired) = apply_stops(&text, &stops, cfg.stop_mode);
    if let Some(max) = max_tokens.filter(|_| !cfg.ignore_max_tokens) {
        let limit = (max as usize).saturating_mul(4);
        if content.len() > limit {
            let mut end = limit;
            while !content.is_char_boundary(end) {
                end -= 1;
            }
            content.truncate(end);
            finish = "length";
        }
    }
    let prompt_tokens = if cfg.enforce_window {
        true_tokens
    } else {
        (body["messages"].to_string().len() + body["prompt"].as_str().map_or(0, str::len)) as u64
            / 4
    };
    let usage = json!({"prompt_tokens": prompt_tokens, "completion_tokens": content.len() as u64 / 4 + 1, "total_tokens": prompt_tokens + content.len() as u64 / 4 + 1});
    let stop_reason = if cfg.stop_reason {
        fired.map(Value::String).unwrap_or(Value::Null)
    } else {
        Value::Null
    };

    let stream = body["stream"].as_bool().unwrap_or(false);
    if !stream {
        tokio::time::sleep(cfg.first_byte_delay).await;
        if cfg.malformed_json {
            return json_response(
                StatusCode::OK,
                "{\"choices\": [{\"message\": {\"content\": \"half".to_owned(),
            );
        }
        let mut choice = if chat {
            let mut m = json!({"role": "assistant", "content": content});
            if let Some(r) = &cfg.reasoning {
                m["reasoning_content"] = Value::String(r.clone());
            }
            json!({"index": 0, "message": m, "finish_reason": finish})
        } else {
            json!({"index": 0, "text": content, "finish_reason": finish})
        };
        if cfg.stop_reason {
            choice["stop_reason"] = stop_reason;
        }
        let choices = if cfg.empty_choices {
            json!([])
        } else {
            json!([choice])
        };
        let mut out = json!({"choices": choices, "usage": usage});
        add_ids(&mut out, cfg, chat, &model);
        return json_response(StatusCode::OK, out.to_string());
    }

    // Streaming: build the whole SSE text, then write it in small byte chunks.
    let empty_fr = if cfg.empty_finish_reason {
        Value::String(String::new())
    } else {
        Value::Null
    };
    let mut events: Vec<String> = Vec::new();
    let event = |choice: Value| -> String {
        let mut e = json!({"choices": [choice]});
        add_ids(&mut e, cfg, chat, &model);
        format!("data: {e}\n\n")
    };
    if !cfg.empty_choices {
        if chat {
            events.push(event(json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": empty_fr})));
        }
        if let Some(r) = &cfg.reasoning {
            for piece in pieces(r, cfg.token_chars) {
                events.push(event(json!({"index": 0, "delta": {"reasoning_content": piece}, "finish_reason": empty_fr})));
            }
        }
        let mut content_events = 0;
        for (i, piece) in pieces(&content, cfg.token_chars).into_iter().enumerate() {
            if cfg.malformed_json && i == 1 {
                events.push("data: {\"choices\":[{\"delta\":{\"content\":\"x\n\n".to_owned());
                continue;
            }
            let choice = if chat {
                json!({"index": 0, "delta": {"content": piece}, "finish_reason": empty_fr})
            } else {
                json!({"index": 0, "text": piece, "finish_reason": empty_fr})
            };
            events.push(event(choice));
            content_events += 1;
            if cfg.cut_after_events == Some(content_events) {
                events.push(CUT.to_owned());
                break;
            }
        }
        let mut last = if chat {
            json!({"index": 0, "delta": {}, "finish_reason": finish})
        } else {
            json!({"index": 0, "text": "", "finish_reason": finish})
        };
        if cfg.stop_reason {
            last["stop_reason"] = stop_reason;
        }
        events.push(event(last));
    }
    if body["stream_options"]["include_usage"].as_bool() == Some(true) || cfg.empty_choices {
        let mut e = json!({"choices": [], "usage": usage});
        add_ids(&mut e, cfg, chat, &model);
        events.push(format!("data: {e}\n\n"));
    }
    events.push("data: [DONE]\n\n".to_owned());

    let mut parts: Vec<Result<Bytes, std::io::Error>> = Vec::new();
    let mut all: Vec<u8> = Vec::new();
    let mut cut = false;
    for e in events {
        if e == CUT {
            cut = true;
            break;
        }
        all.extend_from_slice(e.as_bytes());
    }
    for piece in all.chunks(cfg.chunk_bytes.max(1)) {
        parts.push(Ok(Bytes::copy_from_slice(piece)));
    }
    if cut {
        parts.push(Err(std::io::Error::other("fake server: stream cut")));
    }
    let guard = StreamGuard {
        inner: inner.clone(),
        done: false,
    };
    let first_delay = cfg.first_byte_delay;
    let chunk_delay = cfg.chunk_delay;
    let body_stream = async_stream::stream! {
        let mut guard = guard;
        tokio::time::sleep(first_delay).await;
        let n = parts.len();
        for (i, p) in parts.into_iter().enumerate() {
            if i > 0 && !chunk_delay.is_zero() {
                tokio::time::sleep(chunk_delay).await;
            }
            let is_err = p.is_err();
            if i + 1 == n && !is_err {
                guard.done = true;
            }
            yield p;
            if is_err {
                guard.done = true;
                return;
            }
        }
    };
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(body_stream))
        .unwrap_or_default()
}

const CUT: &str = "\u{0}CUT";

/// `bytes` bytes of `x` with this status, written in 64 KiB pieces as the client reads them.
fn huge_body(inner: &Arc<Inner>, status: u16, bytes: usize) -> Response {
    static PIECE: [u8; 64 * 1024] = [b'x'; 64 * 1024];
    let guard = StreamGuard {
        inner: inner.clone(),
        done: false,
    };
    let body_stream = async_stream::stream! {
        let mut guard = guard;
        let mut left = bytes;
        while left > 0 {
            let n = left.min(PIECE.len());
            left -= n;
            yield Ok::<_, std::io::Error>(Bytes::from_static(&PIECE[..n]));
        }
        guard.done = true;
    };
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::OK))
        .header("content-type", "application/json")
        .body(Body::from_stream(body_stream))
        .unwrap_or_default()
}

/// Counts streams the client dropped before the end.
struct StreamGuard {
    inner: Arc<Inner>,
    done: bool,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if self.done {
            self.inner.completed.fetch_add(1, Ordering::SeqCst);
        } else {
            self.inner.aborted.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn add_ids(v: &mut Value, cfg: &FakeConfig, chat: bool, model: &str) {
    if cfg.missing_ids {
        return;
    }
    v["id"] = json!("cmpl-fake-1");
    v["object"] = json!(if chat {
        "chat.completion.chunk"
    } else {
        "text_completion"
    });
    v["created"] = json!(1_700_000_000u32);
    v["model"] = json!(model);
}

/// The text of a request's prompt: every message's content (a string, or the `text` of each
/// part), or the completions `prompt`, joined by newlines.
fn prompt_text(body: &Value) -> String {
    let mut out = String::new();
    if let Some(prompt) = body["prompt"].as_str() {
        out.push_str(prompt);
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        match &message["content"] {
            Value::String(s) => out.push_str(s),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .for_each(|t| out.push_str(t)),
            _ => {}
        }
        out.push('\n');
    }
    out
}

/// Split text into pieces of `n` characters.
fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}

/// The text a server sends for a turn, its finish reason, and the stop that fired.
fn apply_stops(
    text: &str,
    stops: &[String],
    mode: StopMode,
) -> (String, &'static str, Option<String>) {
    let first = stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()).map(|p| (p + s.len(), p, s)))
        .min();
    match (first, mode) {
        (None, _) | (_, StopMode::Ignore) => (text.to_owned(), "stop", None),
        (Some((_, p, s)), StopMode::Strip | StopMode::Reject) => {
            (text[..p].to_owned(), "stop", Some(s.clone()))
        }
        (Some((end, _, s)), StopMode::Keep) => (text[..end].to_owned(), "stop", Some(s.clone())),
        (Some((_, p, s)), StopMode::FlushPartial) => {
            let mut half = s.len() / 2;
            while !s.is_char_boundary(half) {
                half -= 1;
            }
            (
                format!("{}{}", &text[..p], &s[..half.max(1)]),
                "stop",
                Some(s.clone()),
            )
        }
    }
}
