//! The Anthropic face: `POST /v1/messages` (Anthropic's Messages API) and
//! `POST /v1/messages/count_tokens`.
//!
//! A Messages request is read into the same request model as an OpenAI one (`request.rs`) and
//! answered by the same core, under the same admission (the proxy's key as a bearer token or
//! in `x-api-key`; `anthropic-version` and `anthropic-beta` are accepted and not needed), the
//! same limits and the same log line (`http.rs`). What is only this face's:
//!
//! * `request.rs`: the body, with `serde` types, into the shared model;
//! * `blocks.rs`: the core's events as content blocks (`stops.rs` cuts the text at the
//!   client's `stop_sequences`); `message.rs` the whole `message` (`render.rs` picks whole or
//!   streamed), `stream.rs` the events;
//! * `error.rs`: Anthropic's error shape; `count.rs`: `count_tokens`.
//!
//! A request without tools has no pass-through here: it is answered as a plain chat on the
//! upstream's chat API (`serve/plain.rs`), or by the core on a completions upstream.

mod blocks;
mod count;
mod error;
mod message;
mod render;
mod request;
mod stops;
mod stream;

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::Value;

use super::ServeError;
use super::core::Trace;
use super::face::{Face, Mode, Reading};
use super::http::{Shared, answer_route};
use super::request_log::log_line;
use crate::llm::Api;

/// The Anthropic face.
const MESSAGES: Face = Face {
    path: "/v1/messages",
    read,
    error: error::response,
};

fn read(body: &Value, api: Api) -> Result<Reading, ServeError> {
    let parsed = request::read(body, true)?;
    let mode = if parsed.ask.tools.is_empty() && api == Api::Chat {
        Mode::Plain
    } else {
        Mode::Core
    };
    Ok(Reading::Answer {
        ask: Box::new(parsed.ask),
        mode,
        render: render::render_for(parsed.thinking, parsed.stops),
    })
}

/// `POST /v1/messages`.
pub(crate) async fn create(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    answer_route(&shared, &headers, body, &MESSAGES).await
}

/// `POST /v1/messages/count_tokens`.
pub(crate) async fn count_tokens(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let response = match count::count(&shared, &headers, body).await {
        Ok(r) => r,
        Err(e) => error::response(e),
    };
    let path = "/v1/messages/count_tokens";
    log_line("POST", path, &response, started, &Trace::default());
    response
}
