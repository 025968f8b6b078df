//! The server's context window: how many tokens a request (prompt and turn together) may take.
//!
//! Stated by the caller (the model client's configuration: then no request is made), or learned
//! once per client, before its first run, from the answers the server-kind detection already fetched whenever they say it:
//!
//! * **llama.cpp**: `GET /props` → `default_generation_settings.n_ctx`, which is the window of
//!   *one slot*: `-c 2048 --parallel 2` serves 1,024 tokens a request, and that is what it
//!   reports (and what it refuses beyond). A keyed server refuses `/props` without the key; its
//!   `/v1/models` entry says the same in `meta.n_ctx`.
//! * **vLLM** and **SGLang**: `GET /v1/models` → `data[].max_model_len` (the served model's
//!   entry; the smallest when the model is not listed by its name).
//! * **Ollama** serves 4,096 tokens (newer versions: more with much VRAM) unless the server's
//!   `OLLAMA_CONTEXT_LENGTH` or the model's `num_ctx` says otherwise, whatever the model could
//!   take, and silently cuts a longer prompt *from the front*. So: the loaded model's
//!   `context_length` in `GET /api/ps` (what is really allocated) when it is loaded; else
//!   `num_ctx` from `POST /api/show`'s `parameters`; else the smaller of the model's own
//!   `model_info.<arch>.context_length` and 4,096. Two more small requests, once per client.
//! * Any other server: unknown (`None`), and the caller does no fitting.
//!
//! Every probe has the detection's short timeout and 1 MiB cap, and a number that is not a
//! plausible window (0, or more than 2³² tokens) is no answer.

use serde_json::{Value, json};

use super::Upstream;
use super::http::{MAX_PROBE_BODY, PROBE_TIMEOUT};
use super::kind::ServerKind;

/// What Ollama serves when nothing says otherwise.
pub(super) const OLLAMA_DEFAULT_WINDOW: u64 = 4096;

/// The largest window believed (a server may send any number).
const MAX_WINDOW: u64 = 1 << 32;

impl Upstream {
    /// The context window, learned from the server once (see the module docs; concurrent
    /// callers wait for the one probe).
    pub async fn window(&self) -> Option<u64> {
        *self.window.get_or_init(|| self.learn_window()).await
    }

    /// The context window when it was learned already.
    pub fn learned_window(&self) -> Option<u64> {
        self.window.get().copied().flatten()
    }

    async fn learn_window(&self) -> Option<u64> {
        let (kind, seen) = match self.endpoint.stated {
            None => {
                let detected = self.detected().await;
                (detected.kind, detected.window)
            }
            // No detection ran: ask the one endpoint of this kind that says it.
            Some(kind) => (kind, self.probe_window(kind).await),
        };
        let window = match (seen, kind) {
            (Some(w), _) => Some(w),
            (None, ServerKind::Ollama) => Some(self.ollama_window().await),
            (None, _) => None,
        };
        tracing::debug!(server = %kind, window = ?window, url = %self.endpoint.base_url, "context window");
        window
    }

    /// For a stated kind: the window from the answer that kind gives it in.
    async fn probe_window(&self, kind: ServerKind) -> Option<u64> {
        if kind == ServerKind::LlamaCpp
            && let Some(window) = self.llama_props().await.as_ref().and_then(from_props)
        {
            return Some(window);
        }
        if matches!(
            kind,
            ServerKind::LlamaCpp | ServerKind::Vllm | ServerKind::Sglang
        ) {
            let url = format!("{}/models", self.endpoint.base_url);
            let models = self.get_json(url, true, PROBE_TIMEOUT);
            return models
                .await
                .ok()
                .and_then(|m| from_models(&m, &self.endpoint.model));
        }
        None
    }

    /// What Ollama serves this model with (see the module docs); its default when it cannot say.
    async fn ollama_window(&self) -> u64 {
        let root = self.root().to_owned();
        let ps = self.get_json(format!("{root}/api/ps"), false, PROBE_TIMEOUT);
        if let Some(loaded) = ps
            .await
            .ok()
            .and_then(|ps| ollama_loaded(&ps, &self.endpoint.model))
        {
            return loaded;
        }
        let body = json!({ "model": self.endpoint.model }).to_string();
        let request = self
            .http
            .post(format!("{root}/api/show"))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        let show = self
            .send_capped(request, false, PROBE_TIMEOUT, MAX_PROBE_BODY)
            .await
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        show.as_ref().map_or(OLLAMA_DEFAULT_WINDOW, ollama_served)
    }
}

/// A number a server gave as a window, if it is a plausible one.
fn plausible(n: Option<u64>) -> Option<u64> {
    n.filter(|n| (1..=MAX_WINDOW).contains(n))
}

/// llama.cpp's `/props`: the window of one slot.
pub(super) fn from_props(props: &Value) -> Option<u64> {
    plausible(props["default_generation_settings"]["n_ctx"].as_u64())
}

/// A `/v1/models` list: the served model's `max_model_len` (vLLM, SGLang) or `meta.n_ctx`
/// (llama.cpp); the smallest of the list's when no entry has the model's name.
pub(super) fn from_models(models: &Value, model: &str) -> Option<u64> {
    let entries = models.get("data").and_then(Value::as_array)?;
    let window = |m: &Value| plausible(m["max_model_len"].as_u64().or(m["meta"]["n_ctx"].as_u64()));
    let named = entries
        .iter()
        .find(|m| m["id"].as_str() == Some(model))
        .and_then(window);
    named.or_else(|| entries.iter().filter_map(window).min())
}

/// Ollama's `/api/ps`: the context allocated to the model, when it is loaded.
fn ollama_loaded(ps: &Value, model: &str) -> Option<u64> {
    let tagged = format!("{model}:latest");
    let is_ours = |m: &&Value| {
        ["name", "model"]
            .iter()
            .filter_map(|k| m[*k].as_str())
            .any(|n| n == model || n == tagged)
    };
    let loaded = ps["models"].as_array()?.iter().find(is_ours)?;
    plausible(loaded["context_length"].as_u64())
}

/// Ollama's `/api/show`: the model's own `num_ctx` parameter, else the smaller of its
/// architecture's context length and Ollama's default.
fn ollama_served(show: &Value) -> u64 {
    let num_ctx = show["parameters"].as_str().and_then(|p| {
        p.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("num_ctx")).then(|| words.next()?.parse().ok())?
        })
    });
    if let Some(n) = plausible(num_ctx) {
        return n;
    }
    let info = &show["model_info"];
    let arch = info["general.architecture"].as_str().unwrap_or_default();
    let trained = info[format!("{arch}.context_length")].as_u64().or_else(|| {
        info.as_object()?
            .iter()
            .find(|(k, _)| k.ends_with(".context_length"))
            .and_then(|(_, v)| v.as_u64())
    });
    plausible(trained).map_or(OLLAMA_DEFAULT_WINDOW, |n| n.min(OLLAMA_DEFAULT_WINDOW))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_answer_says_its_window() {
        let props = json!({"default_generation_settings": {"n_ctx": 1024}, "total_slots": 2});
        assert_eq!(from_props(&props), Some(1024));
        assert_eq!(from_props(&json!({"total_slots": 1})), None);
        assert_eq!(
            from_props(&json!({"default_generation_settings": {"n_ctx": 0}})),
            None
        );
        let models = json!({"data": [
            {"id": "big", "max_model_len": 32768},
            {"id": "small", "max_model_len": 2048},
        ]});
        assert_eq!(from_models(&models, "big"), Some(32768));
        assert_eq!(from_models(&models, "alias"), Some(2048));
        let llama =
            json!({"data": [{"id": "m.gguf", "owned_by": "llamacpp", "meta": {"n_ctx": 4096}}]});
        assert_eq!(from_models(&llama, "x"), Some(4096));
        let openai = json!({"data": [{"id": "gpt", "owned_by": "openai"}]});
        assert_eq!(from_models(&openai, "gpt"), None);
        let absurd = json!({"data": [{"id": "m", "max_model_len": u64::MAX}]});
        assert_eq!(from_models(&absurd, "m"), None);
    }

    #[test]
    fn ollama_serves_what_it_allocated_else_its_default() {
        let ps = json!({"models": [{"name": "qwen:latest", "model": "qwen:latest", "context_length": 8192}]});
        assert_eq!(ollama_loaded(&ps, "qwen"), Some(8192));
        assert_eq!(ollama_loaded(&ps, "llama3"), None);
        let show = json!({"parameters": "stop \"<|im_end|>\"\nnum_ctx                        16384",
            "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768}});
        assert_eq!(ollama_served(&show), 16384);
        let show =
            json!({"model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768}});
        assert_eq!(ollama_served(&show), OLLAMA_DEFAULT_WINDOW);
        let show =
            json!({"model_info": {"general.architecture": "tiny", "tiny.context_length": 2048}});
        assert_eq!(ollama_served(&show), 2048);
        assert_eq!(ollama_served(&json!({})), OLLAMA_DEFAULT_WINDOW);
    }
}
