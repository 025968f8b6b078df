//! What tagloop knows about the server behind an OpenAI-compatible base URL, apart from asking it
//! for a turn: which server it is (llama.cpp, vLLM, SGLang, Ollama, OpenAI: `kind.rs`, asked in `detect.rs`),
//! tokens its context window takes (`window.rs`), how many tokens a prompt is by its own
//! tokenizer (`tokens.rs`), and how it words a refusal of a prompt too long for that window
//! (`overflow.rs`); below them, the edge of the HTTP client every body is read through, up to a
//! cap, with every failure as a [`Fault`] (`http.rs`). An [`Upstream`] asks each question at
//! most once per client (the kind, the window) or until the server says it has no answer (the
//! tokenizer). The model client (`crate::llm::openai`) sits above and uses it; nothing here
//! knows of turns, prompts or the client's errors: failures leave as an [`UpstreamError`],
//! which the client maps and redacts with its own.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde_json::Value;

use crate::secret::Secret;

mod detect;
mod error;
mod http;
mod kind;
mod overflow;
mod tokens;
mod window;

pub use error::UpstreamError;
pub use http::{Fault, HttpFailure, MAX_ANSWER_BODY, pooled, read_capped, read_failure};
// The serve proxy reads its upstream's bodies with the same capped reader.
#[cfg(feature = "serve")]
pub use http::read_up_to;
pub use kind::ServerKind;
pub use overflow::ContextOverflow;
pub use tokens::Tokenize;

use http::MAX_PROBE_BODY;
use kind::Detected;

/// Where the server is and how to reach it: what an [`Upstream`] is built from.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The normalised base URL, with its version path (`http://127.0.0.1:8080/v1`).
    pub base_url: String,
    /// The model's name, as requests name it.
    pub model: String,
    /// The bearer key (may be empty); sent only where a request says so, never printed.
    pub api_key: Secret,
    /// Extra HTTP headers for every request.
    pub headers: Vec<(String, String)>,
    /// The server's kind as the user stated it; `None`: detected on first use.
    pub stated: Option<ServerKind>,
}

/// The server behind a base URL, and what was learnt of it (see the module docs).
#[derive(Debug)]
pub struct Upstream {
    endpoint: Endpoint,
    /// The model client's HTTP client (it follows no redirect).
    http: reqwest::Client,
    /// What the kind detection learnt (the kind, and the window when the same answers said it).
    detected: tokio::sync::OnceCell<Detected>,
    /// The context window learnt (`None` inside: the server did not say).
    window: tokio::sync::OnceCell<Option<u64>>,
    /// The server answered 404 to a token count: it has no tokenizer there, never asked again.
    no_tokenizer: AtomicBool,
}

impl Upstream {
    /// The server at `endpoint`, asked over `http` (nothing is asked yet).
    pub fn new(endpoint: Endpoint, http: reqwest::Client) -> Self {
        Upstream {
            endpoint,
            http,
            detected: tokio::sync::OnceCell::new(),
            window: tokio::sync::OnceCell::new(),
            no_tokenizer: AtomicBool::new(false),
        }
    }

    /// The server's root (the base URL without its `/v1`), where llama.cpp, vLLM, SGLang and
    /// Ollama serve their own endpoints (`/props`, `/tokenize`, `/api/ps`).
    fn root(&self) -> &str {
        let base = &self.endpoint.base_url;
        base.strip_suffix("/v1").unwrap_or(base)
    }

    /// The ids the server lists at `GET {base_url}/models` (asked as a turn is: key, no redirect,
    /// 30 s, 1 MiB). Ids are the server's text: neutralise them before showing them.
    pub async fn served_models(&self) -> Result<Vec<String>, UpstreamError> {
        let url = format!("{}/models", self.endpoint.base_url);
        let list = self
            .get_json(url.clone(), true, Duration::from_secs(30))
            .await?;
        let id = |m: &Value| m.get("id")?.as_str().map(str::to_owned);
        match list.get("data").and_then(Value::as_array) {
            Some(data) => Ok(data.iter().filter_map(id).collect()),
            None => Err(UpstreamError::Unexpected(format!(
                "{url} sent no `data` list"
            ))),
        }
    }

    /// A JSON answer to a GET; at most 1 MiB.
    async fn get_json(
        &self,
        url: String,
        key: bool,
        limit: Duration,
    ) -> Result<Value, UpstreamError> {
        let body = self
            .send_capped(self.http.get(&url), key, limit, MAX_PROBE_BODY)
            .await?;
        serde_json::from_slice(&body)
            .map_err(|e| UpstreamError::Unexpected(format!("{url}: not JSON: {e}")))
    }

    /// Send a request beside the turns (a probe, a token count) and read its whole answer, at
    /// most `cap` bytes (a larger one is refused unread), within `limit`. The key goes only in
    /// the `Authorization` header, and only with `key`; the configured headers go along.
    async fn send_capped(
        &self,
        mut req: reqwest::RequestBuilder,
        key: bool,
        limit: Duration,
        cap: usize,
    ) -> Result<Vec<u8>, Fault> {
        req = req.timeout(limit);
        let endpoint = &self.endpoint;
        if key && !endpoint.api_key.is_empty() {
            req = req.bearer_auth(endpoint.api_key.expose());
        }
        for (k, v) in &endpoint.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let resp = req.send().await.map_err(Fault::Io)?;
        if !resp.status().is_success() {
            // A redirect included: the client follows none (the key would go along).
            return Err(Fault::Status(read_failure(resp).await));
        }
        read_capped(resp, cap, "the answer").await
    }
}
