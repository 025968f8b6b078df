//! Building the client: the one `reqwest::Client` every request goes over (turns, whole or
//! streamed, and the server's probes), and its settings.

use std::sync::atomic::{AtomicBool, Ordering};

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use super::{OpenAiConfig, OpenAiModel, normalize_base_url};
use crate::llm::LlmError;
use crate::secret::Redactor;
use crate::upstream::{Endpoint, Upstream, pooled};

impl OpenAiModel {
    /// Build a client (no request is made yet).
    ///
    /// The HTTP client follows no redirect: a `3xx` is an error that names where the server
    /// points (following it would carry the key to that address).
    pub fn new(mut cfg: OpenAiConfig) -> Result<Self, LlmError> {
        let base_url = normalize_base_url(&cfg.base_url)?;
        cfg.base_url = base_url.clone();
        let builder = pooled(reqwest::Client::builder(), cfg.pool_idle_per_host);
        let mut builder = builder
            .connect_timeout(cfg.connect_timeout)
            .read_timeout(cfg.read_timeout)
            .redirect(reqwest::redirect::Policy::none());
        if base_url.starts_with("http://") && !through_https_proxy() {
            // Plain HTTP (a local server) and no redirect: no TLS is needed (unless the request
            // goes through an `https://` proxy), and loading the system's root certificates is
            // most of the start-up time of a short run.
            builder = builder.tls_certs_only([]);
        }
        let http = builder
            .build()
            .map_err(|e| LlmError::Config(format!("cannot build the HTTP client: {e}")))?;
        let headers = request_headers(&cfg)?;
        let upstream = Upstream::new(
            Endpoint {
                base_url: base_url.clone(),
                model: cfg.model.clone(),
                api_key: cfg.api_key.clone(),
                headers: cfg.headers.clone(),
                stated: cfg.server,
            },
            http.clone(),
        );
        let mut redactor = Redactor::new();
        redactor.add_secret(&cfg.api_key);
        Ok(OpenAiModel {
            cfg,
            base_url,
            http,
            headers,
            stop_rejected: AtomicBool::new(false),
            grammar_rejected: AtomicBool::new(false),
            lark_rejected: AtomicBool::new(false),
            prefill_rejected: AtomicBool::new(false),
            stream_rejected: AtomicBool::new(false),
            slow_to_end: AtomicBool::new(false),
            runs_past_stops: AtomicBool::new(false),
            upstream,
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
}

/// The headers of a turn's request: the key as a bearer token, then the configured headers
/// (which win).
fn request_headers(cfg: &OpenAiConfig) -> Result<HeaderMap, LlmError> {
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

/// Whether a plain-`http://` request would go through an `https://` proxy (reqwest reads
/// `HTTP_PROXY` and `ALL_PROXY`, either case), which needs the root certificates after all.
fn through_https_proxy() -> bool {
    ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .any(|url| url.trim().to_ascii_lowercase().starts_with("https://"))
}
