//! The upstream clients, one per model name a request asks for (one only with `--model`), kept
//! for the probes they learnt (the server's kind, its window). At most [`MAX_MODELS`] are kept;
//! a new name evicts the one least recently used, so made-up names cost a client each, never a
//! lockout of the names that come after them.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use lru::LruCache;

use super::ServeError;
use super::config::ServeConfig;
use crate::llm::Api;
use crate::llm::openai::{OpenAiConfig, OpenAiModel};

/// Most model names a proxy keeps a client for.
pub(crate) const MAX_MODELS: usize = 32;

/// The clients by model name, least recently used evicted first.
pub(crate) struct Clients {
    cache: Mutex<LruCache<String, Arc<OpenAiModel>>>,
}

impl Clients {
    pub(crate) fn new() -> Clients {
        let cap = NonZeroUsize::new(MAX_MODELS).unwrap_or(NonZeroUsize::MIN);
        Clients {
            cache: Mutex::new(LruCache::new(cap)),
        }
    }

    /// The client for `name`: the kept one, or a new one kept in place of the least recently
    /// used.
    pub(crate) fn get(
        &self,
        cfg: &ServeConfig,
        name: &str,
    ) -> Result<Arc<OpenAiModel>, ServeError> {
        self.get_with_api(cfg, name, cfg.api)
    }

    /// The client for `name` over `api` (the native tool format asks `/completions` whatever
    /// `--api` says; native/).
    pub(crate) fn get_with_api(
        &self,
        cfg: &ServeConfig,
        name: &str,
        api: Api,
    ) -> Result<Arc<OpenAiModel>, ServeError> {
        let key = if api == cfg.api {
            name.to_owned()
        } else {
            format!("{}\u{0}{name}", api.as_str())
        };
        let mut cache = self
            .cache
            .lock()
            .map_err(|_| ServeError::Config("the model cache is poisoned".into()))?;
        if let Some(model) = cache.get(&key) {
            return Ok(model.clone());
        }
        let mut client = OpenAiConfig::new(cfg.upstream.clone(), name.to_owned());
        client.api = api;
        client.api_key = cfg.upstream_key.clone();
        client.grammar = cfg.grammar;
        client.grammar_syntax = cfg.grammar_syntax;
        client.context_window = cfg.context_window;
        // The request's own time limit bounds the turn; the client retries what it wants retried.
        client.turn_timeout = Some(cfg.timeout);
        // And the wait for the first byte: a server sends nothing while it reads a long prompt (an
        // agent's system prompt and tools on a CPU take minutes), and a shorter idle limit would
        // cut such a turn, then send the same prompt again.
        client.read_timeout = cfg.timeout;
        client.max_retries = 1;
        // A kept connection for every request answered at once.
        client.pool_idle_per_host = cfg.concurrency;
        client.stream = cfg.upstream_stream;
        let model =
            Arc::new(OpenAiModel::new(client).map_err(|e| ServeError::Config(e.to_string()))?);
        cache.put(key, model.clone());
        Ok(model)
    }

    /// How many clients are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.cache.lock().map(|c| c.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_names_evict_the_oldest_and_never_lock_out_a_new_one() {
        let cfg = ServeConfig::new("http://127.0.0.1:9/v1");
        let clients = Clients::new();
        let kept = clients.get(&cfg, "real-model").unwrap();
        for i in 0..(MAX_MODELS + 8) {
            clients.get(&cfg, &format!("made-up-{i}")).unwrap();
            // The name in use stays: used between the made-up ones, it is never the oldest.
            assert!(Arc::ptr_eq(
                &kept,
                &clients.get(&cfg, "real-model").unwrap()
            ));
        }
        assert_eq!(clients.len(), MAX_MODELS);
        assert!(clients.get(&cfg, "a-new-name-after-all-that").is_ok());
    }

    #[test]
    fn the_upstream_may_stay_silent_as_long_as_the_request_may_last() {
        let mut cfg = ServeConfig::new("http://127.0.0.1:9/v1");
        cfg.timeout = std::time::Duration::from_secs(900);
        let model = Clients::new().get(&cfg, "m").unwrap();
        assert_eq!(model.config().read_timeout, cfg.timeout);
        assert_eq!(model.config().turn_timeout, Some(cfg.timeout));
    }
}
