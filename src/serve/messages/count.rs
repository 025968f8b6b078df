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

/// Count a request's input tokens, under the same admission and time limit as an answer.
pub(crate) async fn count(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ServeError> {
    let (bytes, _slot) = admit(shared, headers, body).await?;
    let secs = shared.cfg.timeout.as_secs();
    let work = async {
        let value = parse_json(&bytes)?;
        let parsed = request::read(&value, false)?;
        let prompt = prompt_of(shared, &parsed.ask)?;
        let model = model_for(shared, parsed.ask.model.as_deref())?;
        model.prepare().await;
        let counted = model.count_tokens(&prompt).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the upstream's tokenizer failed; the count is estimated");
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
