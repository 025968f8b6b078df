//! Which server is behind the base URL, and how it takes a grammar.
//!
//! * **llama.cpp** answers `GET /props` (at the server's root, beside `/v1`) with its
//!   generation settings, and names itself `llamacpp` in `/v1/models`' `owned_by`. It takes
//!   `grammar` (GBNF) on `/completions` and `/chat/completions`, and lazy grammars:
//!   `grammar_lazy: true` with `grammar_triggers: [{"type": 1, "value": "<action>"}, …]`
//!   (type 1 is a word), the trigger words also listed in `preserved_tokens` (llama.cpp refuses a
//!   one-token trigger word that is not).
//! * **vLLM** and **SGLang** name themselves in `/v1/models`' `owned_by`. vLLM takes
//!   `structured_outputs: {"grammar": …}` (its `guided_grammar` is gone since 0.12), SGLang
//!   `ebnf`; both hand the text to xgrammar, which reads GBNF.
//! * **Ollama** (`owned_by` `library` or `ollama`), **OpenAI** (`openai`, `system`) and the rest
//!   take no general grammar.
//!
//! The detection runs once per client (before the first run, or on the first turn that has a
//! grammar to send), with short timeouts, following no redirect and reading at most 1 MiB of an
//! answer; a server that answers neither probe is `other`. The same answers also say the
//! server's context window when they can (`window.rs`): no probe is made twice.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::transport::{Fault, MAX_PROBE_BODY, PROBE_TIMEOUT, read_capped, read_failure};
use super::{OpenAiModel, window};
use crate::llm::{Constraint, GrammarMode, LlmError, ServerKind, TurnGrammar};

/// llama.cpp's trigger type for a word.
const TRIGGER_WORD: u8 = 1;

/// What the detection learned from the server's answers: its kind, and its context window when
/// the same answers said it (llama.cpp's `/props`, vLLM's and SGLang's `max_model_len`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Detected {
    pub(super) kind: ServerKind,
    pub(super) window: Option<u64>,
}

impl OpenAiModel {
    /// The server's kind: stated in the config, or detected once.
    pub async fn server_kind(&self) -> ServerKind {
        if let Some(kind) = self.cfg.server {
            return kind;
        }
        self.detected().await.kind
    }

    /// The detection's findings, probed once per client (concurrent callers wait for the one
    /// probe).
    pub(super) async fn detected(&self) -> Detected {
        *self.server.get_or_init(|| self.detect()).await
    }

    /// The server's root (the base URL without its `/v1`), where llama.cpp, vLLM, SGLang and
    /// Ollama serve their own endpoints (`/props`, `/tokenize`, `/api/ps`).
    pub(super) fn root(&self) -> &str {
        self.base_url.strip_suffix("/v1").unwrap_or(&self.base_url)
    }

    async fn detect(&self) -> Detected {
        let detected = self.probe().await;
        tracing::debug!(server = %detected.kind, window = ?detected.window, url = %self.base_url, "server kind detected");
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
        let models = self.get_json(format!("{}/models", self.base_url), true, PROBE_TIMEOUT);
        let Ok(models) = models.await else {
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
        let window = window::from_models(&models, &self.cfg.model);
        Detected { kind, window }
    }

    /// llama.cpp's `GET /props` answer, when the server gives one (asked without the key).
    pub(super) async fn llama_props(&self) -> Option<Value> {
        let props = self.get_json(format!("{}/props", self.root()), false, PROBE_TIMEOUT);
        props.await.ok().filter(|props| {
            props.get("default_generation_settings").is_some() || props.get("total_slots").is_some()
        })
    }

    /// The ids the server lists at `GET {base_url}/models` (asked as a turn is: key, no redirect,
    /// 30 s, 1 MiB). Ids are the server's text: neutralise them before showing them.
    pub async fn served_models(&self) -> Result<Vec<String>, LlmError> {
        let (url, within) = (format!("{}/models", self.base_url), Duration::from_secs(30));
        let list = self.get_json(url.clone(), true, within).await?;
        let id = |m: &Value| m.get("id")?.as_str().map(str::to_owned);
        match list.get("data").and_then(Value::as_array) {
            Some(data) => Ok(data.iter().filter_map(id).collect()),
            None => Err(LlmError::Other(format!("{url} sent no `data` list"))),
        }
    }

    /// A JSON answer to a GET, every failure mapped as a turn's is (redacted); at most 1 MiB.
    pub(super) async fn get_json(
        &self,
        url: String,
        key: bool,
        limit: Duration,
    ) -> Result<Value, LlmError> {
        let body = self
            .send_capped(self.http.get(&url), key, limit, MAX_PROBE_BODY)
            .await?;
        serde_json::from_slice(&body).map_err(|e| LlmError::Other(format!("{url}: not JSON: {e}")))
    }

    /// Send a request beside the turns (a probe, a token count) and read its whole answer, at
    /// most `cap` bytes (a larger one is refused unread), within `limit`. The key goes only in
    /// the `Authorization` header, and only with `key`; the configured headers go along. Every
    /// failure is mapped as a turn's is, and redacted.
    pub(super) async fn send_capped(
        &self,
        mut req: reqwest::RequestBuilder,
        key: bool,
        limit: Duration,
        cap: usize,
    ) -> Result<Vec<u8>, LlmError> {
        req = req.timeout(limit);
        if key && !self.cfg.api_key.is_empty() {
            req = req.bearer_auth(self.cfg.api_key.expose());
        }
        for (k, v) in &self.cfg.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let fault = |f: Fault| self.fault(f, 0).err;
        let resp = req.send().await.map_err(|e| fault(Fault::Io(e)))?;
        if !resp.status().is_success() {
            // A redirect included: the client follows none (the key would go along).
            return Err(fault(Fault::Status(read_failure(resp).await)));
        }
        read_capped(resp, cap, "the answer").await.map_err(fault)
    }

    /// How this request's turn will be constrained, given the mode, the server and what the
    /// server refused before.
    pub(super) async fn constraint_for(&self, grammar: Option<&TurnGrammar>) -> Constraint {
        let Some(grammar) = grammar else {
            return Constraint::None;
        };
        if self.cfg.grammar == GrammarMode::Off || self.grammar_rejected() {
            return Constraint::None;
        }
        let kind = self.server_kind().await;
        let send = match self.cfg.grammar {
            GrammarMode::Auto => kind.takes_grammar(),
            GrammarMode::On => !kind.lacks_grammar(),
            GrammarMode::Off => false,
        };
        if !send {
            return Constraint::None;
        }
        if grammar.lazy.is_some() && matches!(kind, ServerKind::LlamaCpp | ServerKind::Other) {
            Constraint::LazyGrammar
        } else {
            Constraint::Grammar
        }
    }

    /// Put the grammar into a request body in the server's own field.
    pub(super) async fn add_grammar(
        &self,
        body: &mut Map<String, Value>,
        grammar: &TurnGrammar,
        constraint: Constraint,
    ) {
        if constraint == Constraint::None {
            return;
        }
        let kind = self.server_kind().await;
        match (constraint, &grammar.lazy) {
            (Constraint::None, _) => {}
            (Constraint::LazyGrammar, Some(lazy)) => {
                body.insert("grammar".into(), Value::String(lazy.gbnf.clone()));
                body.insert("grammar_lazy".into(), Value::Bool(true));
                let triggers: Vec<Value> = lazy
                    .triggers
                    .iter()
                    .map(|t| json!({"type": TRIGGER_WORD, "value": t}))
                    .collect();
                body.insert("grammar_triggers".into(), Value::Array(triggers));
                body.insert("preserved_tokens".into(), json!(lazy.triggers));
            }
            _ => match kind {
                ServerKind::Vllm => {
                    body.insert(
                        "structured_outputs".into(),
                        json!({ "grammar": grammar.gbnf }),
                    );
                }
                ServerKind::Sglang => {
                    body.insert("ebnf".into(), Value::String(grammar.gbnf.clone()));
                }
                _ => {
                    body.insert("grammar".into(), Value::String(grammar.gbnf.clone()));
                }
            },
        }
    }
}

/// Whether a 400 body complains about the grammar fields.
pub(super) fn names_grammar(body: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    ["grammar", "structured_outputs", "ebnf", "guided_"]
        .iter()
        .any(|w| lower.contains(w))
}
