//! Detecting which server is behind the base URL (the kinds are in `kind.rs`).
//!
//! * **llama.cpp** answers `GET /props` (at the server's root, beside `/v1`) with its
//!   generation settings, and names itself `llamacpp` in `/v1/models`' `owned_by`.
//! * **vLLM** and **SGLang** name themselves in `/v1/models`' `owned_by`.
//! * **Ollama** (`owned_by` `library` or `ollama`), **OpenAI** (`openai`, `system`) and the rest
//!   say no more.
//!
//! The detection runs once per client (before the first run, or on the first turn that has a
//! grammar to send), with short timeouts, following no redirect and reading at most 1 MiB of an
//! answer; a server that answers neither probe is `other`. The same answers also say the
//! server's context window when they can (`window.rs`): no probe is made twice. Which field each
//! kind takes a grammar in is the model client's (`llm/openai/grammar.rs`).

use serde_json::Value;

use super::Upstream;
use super::http::PROBE_TIMEOUT;
use super::kind::{Detected, ServerKind};
use super::window;

impl Upstream {
    /// The server's kind: stated, or detected once.
    pub async fn kind(&self) -> ServerKind {
        if let Some(kind) = self.endpoint.stated {
            return kind;
        }
        self.detected().await.kind
    }

    /// The server's kind when it is known without asking: stated, or detected earlier.
    pub fn known_kind(&self) -> Option<ServerKind> {
        (self.endpoint.stated).or_else(|| self.detected.get().map(|d| d.kind))
    }

    /// The detection's findings, probed once per client (concurrent callers wait for the one
    /// probe).
    pub(super) async fn detected(&self) -> Detected {
        *self.detected.get_or_init(|| self.detect()).await
    }

    async fn detect(&self) -> Detected {
        let detected = self.probe().await;
        tracing::debug!(server = %detected.kind, window = ?detected.window, url = %self.endpoint.base_url, "server kind detected");
        detected
    }

    async fn probe(&self) -> Detected {
        // `/props` is outside the base path: asked without the key. A failed probe: not this kind.
        if let Some(props) = self.llama_props().await {
            let window = window::from_props(&props);
            return Detected {
                kind: ServerKind::LlamaCpp,
                window,
            };
        }
        let url = format!("{}/models", self.endpoint.base_url);
        let Ok(models) = self.get_json(url, true, PROBE_TIMEOUT).await else {
            return Detected {
                kind: ServerKind::Other,
                window: None,
            };
        };
        let owners: Vec<String> = models
            .get("data")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|m| m.get("owned_by").and_then(Value::as_str))
            .map(str::to_ascii_lowercase)
            .collect();
        let owned = |names: &[&str]| owners.iter().any(|o| names.contains(&o.as_str()));
        let kind = if owned(&["llamacpp", "llama.cpp"]) {
            ServerKind::LlamaCpp
        } else if owned(&["vllm"]) {
            ServerKind::Vllm
        } else if owned(&["sglang"]) {
            ServerKind::Sglang
        } else if owned(&["library", "ollama"]) {
            ServerKind::Ollama
        } else if owned(&["openai", "system", "openai-internal"]) {
            ServerKind::OpenAi
        } else {
            ServerKind::Other
        };
        let window = window::from_models(&models, &self.endpoint.model);
        Detected { kind, window }
    }

    /// llama.cpp's `GET /props` answer, when the server gives one (asked without the key).
    pub(super) async fn llama_props(&self) -> Option<Value> {
        let props = self.get_json(format!("{}/props", self.root()), false, PROBE_TIMEOUT);
        props.await.ok().filter(|props| {
            props.get("default_generation_settings").is_some() || props.get("total_slots").is_some()
        })
    }
}
