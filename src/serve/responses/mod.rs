//! The Responses face: `POST /v1/responses` (OpenAI's Responses API, as the Open Responses
//! specification writes it down), `GET` and `DELETE /v1/responses/{id}`.
//!
//! A request is admitted as every other (the proxy's key, a slot of `--concurrency`, the body
//! within `--max-body` and its time limit), read on a blocking thread (its JSON values counted
//! first, its schemas compiled within the same bounds), answered by the same core under the
//! same deadline, and logged in one line (`http.rs`). What is only this face's:
//!
//! * `request.rs`: the body, with `items.rs` (the input items as a conversation) and
//!   `tools.rs` (function and custom tools, built-in ones left out with a warning,
//!   `tool_choice`, `text.format`), into the shared model;
//! * `output.rs`: the core's events as output items and stream events; `resource.rs` the
//!   Response object; `render.rs` whole or streamed (`stream.rs`), and kept;
//! * `store.rs`: the stored responses (`store`, `previous_response_id`), each bound to the
//!   hash of the client key that made it;
//! * `error.rs`: the error shape.
//!
//! A request without tools or `text.format` is answered as a plain chat on the upstream's chat
//! API (`serve/plain.rs`), or by the core on a completions upstream, as on the Messages face.

mod error;
mod items;
mod output;
mod render;
mod request;
mod resource;
mod store;
mod stream;
mod tools;

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::ServeError;
use super::answer::Trace;
use super::face::Mode;
use super::http::{Live, Shared, admit, authorised, core_answer, log_line, take_slot, within};
use super::request::parse_json;
use crate::llm::Api;
use crate::shown::Outside;
use render::{ResponsesRender, Saver};
use request::Parsed;
pub(crate) use store::{Limits, Store, StoreError};

/// The store `cfg` asks for: a file in its data directory, or in memory.
pub(crate) fn open_store(cfg: &super::ServeConfig) -> Result<Store, ServeError> {
    let limits = Limits {
        max_bytes: cfg.store_max_bytes,
        max_age: cfg.store_max_age,
    };
    Store::open(cfg.data_dir.as_deref(), limits).map_err(|e| ServeError::Config(e.to_string()))
}

/// The route, for the log line.
const PATH: &str = "/v1/responses";

/// The key a client presents (a bearer token, or `x-api-key`), whose hash its stored
/// responses are bound to; none is the empty key.
fn client_key(headers: &HeaderMap) -> Vec<u8> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .unwrap_or_default()
        .as_bytes()
        .to_vec()
}

/// A failure of the store, logged with its words; the client gets a 500 without them.
fn store_failed(e: StoreError) -> ServeError {
    tracing::warn!(error = %Outside(&e), "the response store failed");
    ServeError::Config("the response store failed".into())
}

/// `POST /v1/responses`.
pub(crate) async fn create(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let mut trace = Trace::default();
    let answered = answer(&shared, &headers, body, &mut trace, started).await;
    let response = answered.unwrap_or_else(error::response);
    log_line("POST", PATH, &response, started, &trace);
    response
}

async fn answer(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    body: Body,
    trace: &mut Trace,
    started: Instant,
) -> Result<Response, ServeError> {
    let (bytes, slot) = admit(shared, headers, body).await?;
    let deadline = tokio::time::Instant::now() + shared.cfg.timeout;
    let store = shared.responses.clone();
    let owner = store.owner(&client_key(headers));
    let api = shared.cfg.api;
    let (read_store, read_owner) = (store.clone(), owner.clone());
    // On a blocking thread, holding the slot: the store's reads and the schemas' compiling are
    // work that must not stall other requests, and no more than `--concurrency` run at once.
    let read = tokio::task::spawn_blocking(move || {
        let read = parse_json(&bytes).and_then(|v| read(&v, &read_store, &read_owner, api));
        (read, slot)
    });
    let reading = async {
        read.await
            .map_err(|_| ServeError::Config("reading the request failed".into()))
    };
    let (read, slot) = within(shared, deadline, reading).await?;
    let (parsed, mode) = read?;
    let Parsed {
        ask,
        echo,
        custom,
        warnings,
        input,
    } = parsed;
    for w in &warnings {
        tracing::warn!(warning = %Outside(w), "responses: part of the request was left out");
    }
    let saver = echo.store.then(|| {
        Arc::new(Saver {
            store,
            owner,
            input,
            redactor: shared.redactor().clone(),
        })
    });
    let render = Arc::new(ResponsesRender {
        echo,
        custom,
        warnings,
        saver,
    });
    let live = Live::new(deadline, slot, started);
    core_answer(shared, ask, mode, render, trace, live, PATH).await
}

/// The body read, after the conversation it continues (`previous_response_id`), which must be
/// this key's.
fn read(
    body: &Value,
    store: &Store,
    owner: &store::Owner,
    api: Api,
) -> Result<(Parsed, Mode), ServeError> {
    let history = match request::previous_id(body) {
        None => Vec::new(),
        Some(id) => {
            let chain = store
                .chain(id, owner)
                .map_err(store_failed)?
                .ok_or_else(|| {
                    ServeError::bad_request(
                        format!(
                            "previous_response_id: no response with id '{}' was found",
                            clipped(id)
                        ),
                        "previous_response_id",
                    )
                })?;
            let mut items = Vec::new();
            for record in chain {
                items.extend(record.input);
                if let Some(Value::Array(output)) = record.response.get("output") {
                    items.extend(output.iter().cloned());
                }
            }
            items
        }
    };
    let parsed = request::read(body, history)?;
    let plain = parsed.ask.tools.is_empty() && parsed.ask.output_schema.is_none();
    let mode = if plain && api == Api::Chat {
        Mode::Plain
    } else {
        Mode::Core
    };
    Ok((parsed, mode))
}

/// An id from a client, as a message quotes it: one line, at most 80 characters.
fn clipped(id: &str) -> String {
    Outside(&id.chars().take(80).collect::<String>()).to_string()
}

/// `GET /v1/responses/{id}`: the stored response, if this key made it.
pub(crate) async fn retrieve(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    stored(&shared, &headers, id, false).await
}

/// `DELETE /v1/responses/{id}`: the stored response removed, if this key made it.
pub(crate) async fn delete(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    stored(&shared, &headers, id, true).await
}

async fn stored(shared: &Arc<Shared>, headers: &HeaderMap, id: String, remove: bool) -> Response {
    let started = Instant::now();
    let response = look(shared, headers, &id, remove)
        .await
        .unwrap_or_else(error::response);
    let method = if remove { "DELETE" } else { "GET" };
    log_line(
        method,
        "/v1/responses/{id}",
        &response,
        started,
        &Trace::default(),
    );
    response
}

async fn look(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    id: &str,
    remove: bool,
) -> Result<Response, ServeError> {
    if !authorised(shared, headers) {
        return Err(ServeError::Unauthorized);
    }
    let _slot = take_slot(shared)?;
    let store = shared.responses.clone();
    let owner = store.owner(&client_key(headers));
    let key = id.to_string();
    let found = tokio::task::spawn_blocking(move || {
        if remove {
            store
                .delete(&key, &owner)
                .map(|gone| gone.then_some(Value::Null))
        } else {
            store.get(&key, &owner).map(|r| r.map(|r| r.response))
        }
    })
    .await
    .map_err(|_| ServeError::Config("reading the store failed".into()))?
    .map_err(store_failed)?;
    Ok(match found {
        None => error::not_found(&clipped(id)),
        Some(_) if remove => {
            let body = json!({"id": id, "object": "response.deleted", "deleted": true});
            (StatusCode::OK, axum::Json(body)).into_response()
        }
        Some(response) => (StatusCode::OK, axum::Json(response)).into_response(),
    })
}
