//! `POST /v1/messages/count_tokens`: the input tokens of a Messages request, counted on the
//! prompt the upstream would get for it (tagloop's system prompt, the tools, the conversation
//! as the text protocol; or the plain chat of a request without tools). The upstream's own
//! tokenizer counts it where it has one (llama.cpp, vLLM, SGLang: `llm/openai/tokens.rs`);
//! otherwise it is estimated from its size, and the answer says so in its
//! `x-tagloop-token-count` header (`tokenizer` or `estimate`).

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::request;
use crate::agent::context::{TokenEstimator, prompt_bytes};
use crate::llm::{Api, Model, Prompt};
use crate::serve::ServeError;
use crate::serve::http::{Shared, admit, model_for};
use crate::serve::request::{Ask, parse_json};
use crate::serve::{conversation, plain};
use crate::shown::Outside;

/// The header that says how the count was made.
const HOW_HEADER: &str = "x-tagloop-token-count";

/// The prompt the upstream would get for `ask`.
fn prompt_of(shared: &Shared, ask: &Ask) -> Result<Prompt, ServeError> {
    if ask.tools.is_empty() && shared.cfg.api == Api::Chat {
        return Ok(plain::prompt(ask));
    }
    let role = conversation::role(ask)?;
    let history = conversation::history(
        ask,
        &role,
        (shared.cfg.api, shared.cfg.thought),
        &shared.templates,
    )?;
    Ok(history.prompt())
}

/// The body read, checked and rendered into the prompt the upstream would get, with the model
/// name it asks for.
fn read_and_render(shared: &Shared, bytes: &[u8]) -> Result<(Option<String>, Prompt), ServeError> {
    let value = parse_json(bytes)?;
    let parsed = request::read(&value, false)?;
    let prompt = prompt_of(shared, &parsed.ask)?;
    Ok((parsed.ask.model, prompt))
}

/// Count a request's input tokens, under the same admission, concurrency slot and time limit
/// as an answer. The body is read, its schemas compiled and its prompt rendered on a blocking
/// thread holding the request's slot, as `/v1/messages` reads its body (`http.rs`): that is CPU
/// work that must not stall other clients' requests on the runtime's thread (issue 44 item 3).
pub(crate) async fn count(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ServeError> {
    let (bytes, slot) = admit(shared, headers, body).await?;
    let secs = shared.cfg.timeout.as_secs();
    let work = async {
        let reader = shared.clone();
        let (read, _slot) = tokio::task::spawn_blocking(move || {
            let read = read_and_render(&reader, &bytes);
            (read, slot)
        })
        .await
        .map_err(|_| ServeError::Config("reading the request failed".into()))?;
        let (model, prompt) = read?;
        let model = model_for(shared, model.as_deref())?;
        model.prepare().await;
        let counted = model.count_tokens(&prompt).await.unwrap_or_else(|e| {
            tracing::warn!(error = %Outside(&e), "the upstream's tokenizer failed; the count is estimated");
            None
        });
        let (tokens, how) = match counted {
            Some(n) => (n, "tokenizer"),
            None => (
                TokenEstimator::new().estimate(prompt_bytes(&prompt)),
                "estimate",
            ),
        };
        let mut response =
            (StatusCode::OK, axum::Json(json!({"input_tokens": tokens}))).into_response();
        response
            .headers_mut()
            .insert(HOW_HEADER, HeaderValue::from_static(how));
        Ok(response)
    };
    tokio::time::timeout(shared.cfg.timeout, work)
        .await
        .unwrap_or(Err(ServeError::Timeout { secs }))
}
