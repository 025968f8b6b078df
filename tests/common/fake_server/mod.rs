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
//! | `guess` | how serve's guess at a question's function is answered, apart from the turns ([`FakeGuess`]; default: an empty answer, which keeps the call) |
//! | `done_delay` | end a streamed body this long after its `data: [DONE]` (the closing chunk comes a moment later, as vLLM's and OpenAI's do) |
//! | `close_after_answer` | answer with `Connection: close`, and close the connection after each answer |
//! | `reject_stream` | `400` to a request with `stream: true` (a gateway that only answers whole) |
//! | `tokenize_percent` | `/tokenize` answers this percentage of the true count (default 100; below: a tokenizer, and so an estimate, that is off) |
//!
//! `max_tokens` / `max_completion_tokens` are honoured roughly (4 bytes per token, then
//! `finish_reason: "length"`). `aborted()` counts streams the client dropped before the end.
//! Requests to the root's own endpoints (`/tokenize`, `/apply-template`, `/api/*`) are kept apart
//! in `root_requests()`; `probes()` counts `/props`, `/v1/models` and Ollama's `/api/ps`, `/api/show`.
//! The routes an application sends beside its chat (`/v1/embeddings`, `/v1/models/{id}`, an
//! upload, an echo, a large stream, `/health`: `passthrough.rs`) are kept raw in `passed()`.
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

mod completions;
mod config;
mod guess;
mod passthrough;
mod root;

use completions::*;
pub use config::*;
pub use guess::FakeGuess;
#[allow(unused_imports)]
pub use passthrough::{PassedRequest, fake_embedding};
pub use root::fake_tokens;
use root::*;

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
    /// Serve's guess requests, kept apart from `requests` (`guess.rs`).
    guesses: Mutex<Vec<Value>>,
    /// Requests to the pass-through routes (`passthrough.rs`), raw.
    passed: Mutex<Vec<PassedRequest>>,
    /// TCP connections accepted.
    connections: AtomicUsize,
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
            guesses: Mutex::new(Vec::new()),
            passed: Mutex::new(Vec::new()),
            connections: AtomicUsize::new(0),
        });
        let app = passthrough::routes(Router::new())
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
        let accepted = inner.clone();
        let listener = listener.tap_io(move |tcp| {
            accepted.connections.fetch_add(1, Ordering::SeqCst);
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

    /// TCP connections accepted so far (a client that keeps its connections opens one).
    pub fn connections(&self) -> usize {
        self.inner.connections.load(Ordering::SeqCst)
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

    /// The bodies of serve's guess requests (not in [`FakeServer::requests`]).
    pub fn guesses(&self) -> Vec<Value> {
        self.inner
            .guesses
            .lock()
            .map(|g| g.clone())
            .unwrap_or_default()
    }

    /// Requests to the pass-through routes (`/v1/embeddings`, `/v1/models/{id}`, `/v1/echo`,
    /// …, `/health`), raw, in order.
    pub fn passed(&self) -> Vec<PassedRequest> {
        self.inner
            .passed
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
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
