//! Serve in the model's own tool format (issue 32 item 4): a model whose chat template declares
//! tools in the Hermes / Qwen2.5 shape (`<tools>` in the system turn, calls written as
//! `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>`) is asked the way it was trained
//! instead of in tagloop's text protocol.
//!
//! The template comes from llama.cpp's `GET /props` (`props.rs`), is rendered here with the
//! request's messages and tools (`template.rs`, bounded), and the prompt goes to the upstream's
//! `/completions` under a grammar of that format (the protocol crate's `native_grammar`:
//! 1..N call blocks whose arguments follow the tools' schemas, or a free answer where
//! `tool_choice` allows one). The turn is read by the dialect reader and validated, refused and
//! repaired as a protocol turn is (`turn.rs`).
//!
//! [`ToolFormat`] chooses: `protocol` (the default) never does this; `native` does it or refuses with a 502
//! when the upstream publishes no usable template; `auto` does it where the template declares
//! tools and falls back to the protocol otherwise (and for a conversation the template fails
//! to render).

mod markers;
mod props;
mod template;
mod turn;

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use lru::LruCache;
use serde_json::{Value, json};

use super::ServeError;
use super::clients::{Clients, MAX_MODELS};
use super::config::ServeConfig;
use crate::llm::Api;
use crate::llm::openai::OpenAiModel;
use crate::shown::Outside;
pub(crate) use template::ChatTemplate;
pub(crate) use turn::answer;

use super::tool_format::ToolFormat;

/// A model asked in its own format: its chat template and a `/completions` client.
pub(crate) struct NativeFormat {
    pub(crate) template: ChatTemplate,
    pub(crate) model: Arc<OpenAiModel>,
    /// `--tool-format native`: a request the template cannot render is refused, not answered
    /// in the protocol.
    pub(crate) forced: bool,
}

/// The templates learnt per model name (as [`Clients`]: at most [`MAX_MODELS`], least
/// recently used evicted). `None`: the upstream publishes no template that declares tools.
pub(crate) struct Formats {
    cache: Mutex<Learnt>,
}

/// What was learnt per model name.
type Learnt = LruCache<String, Option<Arc<NativeFormat>>>;

impl Formats {
    pub(crate) fn new() -> Formats {
        let cap = NonZeroUsize::new(MAX_MODELS).unwrap_or(NonZeroUsize::MIN);
        Formats {
            cache: Mutex::new(LruCache::new(cap)),
        }
    }

    /// The native format for model `name`, when `cfg` and the upstream allow one. A probe that
    /// fails (the upstream unreachable) is not kept: the next request asks again.
    pub(crate) async fn get(
        &self,
        cfg: &ServeConfig,
        clients: &Clients,
        name: &str,
    ) -> Result<Option<Arc<NativeFormat>>, ServeError> {
        if cfg.tool_format == ToolFormat::Protocol {
            return Ok(None);
        }
        let kept = self.lock()?.get(name).cloned();
        let found = match kept {
            Some(found) => found,
            None => match props::fetch(&cfg.upstream).await {
                Ok(props) => {
                    let found = learn(cfg, clients, name, props)?;
                    self.lock()?.put(name.to_owned(), found.clone());
                    found
                }
                Err(e) => {
                    tracing::info!(error = %Outside(&e), "no chat template from the upstream: serve speaks the protocol");
                    // A server that answered (404: not llama.cpp) is not asked again; one that
                    // could not be reached is, on the next request.
                    if !matches!(e, props::ProbeError::Http(_)) {
                        self.lock()?.put(name.to_owned(), None);
                    }
                    None
                }
            },
        };
        if found.is_none() && cfg.tool_format == ToolFormat::Native {
            return Err(ServeError::Upstream {
                reason: "the upstream publishes no chat template that declares tools (llama.cpp's GET /props); serve it with --tool-format protocol".into(),
            });
        }
        Ok(found)
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Learnt>, ServeError> {
        self.cache
            .lock()
            .map_err(|_| ServeError::Config("the template cache is poisoned".into()))
    }
}

/// The native format the props allow: a template that compiles and, rendered with a probe
/// tool, shows the tool and the `<tool_call>` format.
fn learn(
    cfg: &ServeConfig,
    clients: &Clients,
    name: &str,
    props: props::Props,
) -> Result<Option<Arc<NativeFormat>>, ServeError> {
    let Some(source) = props.chat_template.filter(|t| !t.trim().is_empty()) else {
        tracing::info!("the upstream publishes no chat template: serve speaks the protocol");
        return Ok(None);
    };
    let template = match ChatTemplate::new(
        &source,
        props.bos_token.as_deref().unwrap_or_default(),
        props.eos_token.as_deref().unwrap_or_default(),
    ) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %Outside(&e), "the upstream's chat template does not compile: serve speaks the protocol");
            return Ok(None);
        }
    };
    if let Err(why) = declares_tools(&template) {
        tracing::info!(reason = %Outside(&why), "the upstream's chat template is not used for tools: serve speaks the protocol");
        return Ok(None);
    }
    let model = clients.get_with_api(cfg, name, Api::Completions)?;
    tracing::info!(
        "the upstream's chat template declares tools: serve asks in the model's own format"
    );
    Ok(Some(Arc::new(NativeFormat {
        template,
        model,
        forced: cfg.tool_format == ToolFormat::Native,
    })))
}

/// Whether `template` writes a probe tool into the prompt with the `<tool_call>` format.
fn declares_tools(template: &ChatTemplate) -> Result<(), String> {
    const PROBE: &str = "tagloop_probe_tool";
    let tools = [
        json!({"type": "function", "function": {"name": PROBE, "description": "A probe.", "parameters": {"type": "object", "properties": {}}}}),
    ];
    let messages = [json!({"role": "user", "content": "Hello."})];
    let prompt = template
        .render(&messages, &tools)
        .map_err(|e| e.to_string())?;
    if !prompt.contains(PROBE) {
        return Err("it does not write the tools into the prompt".into());
    }
    if !prompt.contains("<tool_call>") {
        return Err("its call format is not <tool_call> JSON".into());
    }
    Ok(())
}

/// The tools as a template expects them (OpenAI's shape).
pub(crate) fn tools_json(ask: &super::request::Ask) -> Vec<Value> {
    ask.tools
        .iter()
        .map(|t| {
            json!({"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters,
            }})
        })
        .collect()
}
