//! The routes: which path each face answers. The map sits above the faces' handlers (`http.rs`'s
//! Chat Completions, completions and models; `messages/`), so no face imports the map and the map
//! imports every face: the one place to read what serve answers.

use axum::Router;
use axum::routing::{get, post};

use super::config::ServeConfig;
use super::http::{Shared, chat, completions, models};
use super::key::close_after_refusal;
use super::passthrough;
use super::{ServeError, messages, responses};

/// The router for `cfg`; fails only on a configuration that cannot work (a bad upstream URL).
pub(crate) fn build(cfg: ServeConfig) -> Result<Router, ServeError> {
    let shared = Shared::new(cfg)?;
    Ok(Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/v1/messages", post(messages::create))
        .route("/v1/messages/count_tokens", post(messages::count_tokens))
        .route("/v1/models", get(models))
        .route("/v1/responses", post(responses::create))
        .route(
            "/v1/responses/{id}",
            get(responses::retrieve).delete(responses::delete),
        )
        // What no route above answers passes through (`passthrough/`), the key checked first;
        // a route added above takes its path from the fallback without a change here.
        .method_not_allowed_fallback(passthrough::wrong_method)
        .fallback(passthrough::fallback)
        .layer(axum::middleware::map_response(close_after_refusal))
        .with_state(shared))
}
