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

mod answer;
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
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::ServeError;
use super::core::Trace;
use super::face::Mode;
use super::http::{Live, Shared, admit, authorised, core_answer, take_slot, within};
use super::request::parse_json;
use super::request_log::{RequestLog, log_line};
use crate::llm::Api;
use crate::shown::Outside;
use render::{ResponsesRender, Saver};
use request::Parsed;
pub(crate) use store::{Store, StoreError, open_store};

/// The route, for the log line.
const PATH: &str = "/v1/responses";

/// The key a client presents (a bearer token, or `x-api-key`), whose hash its stored
/// responses are bound to; none is the empty key.
fn client_key(headers: &HeaderMap) -> Vec<u8> {
    super::key::presented(headers).as_bytes().to_vec()
}

/// A failure of the store, logged with its words; the client gets a 500 without them (they
/// name the store's address), saying whether to retry.
fn store_failed(e: StoreError) -> ServeError {
    tracing::warn!(error = %Outside(&e), "the response store failed");
    ServeError::Config(match e {
        StoreError::Unreachable { .. } => {
            "the response store could not be reached or did not answer in time; retry later".into()
        }
        _ => "the response store failed".into(),
    })
}

/// `POST /v1/responses`.
pub(crate) async fn create(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let mut log = RequestLog::start();
    let answered = answer(&shared, &headers, body, &mut log.trace, log.started).await;
    log.end("POST", PATH, answered.unwrap_or_else(error::response))
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
        names,
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
        names,
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
                items.extend(record.response.output);
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

#[cfg(test)]
mod measure {
    //! The store's cost, measured (BENCHMARKS.md, *The Responses face's store*): run with
    //! `cargo test --release --lib serve::responses::measure -- --ignored --nocapture`.
    use std::time::{Duration, Instant};

    use super::store::{Limits, Record, Store, now};
    use super::*;

    /// One turn of a tool conversation as a client continues it: a function call's output in,
    /// a response with a reasoning item and a call out, two tools repeated in it.
    fn turn(owner: &store::Owner, previous: Option<&str>, i: usize) -> Record {
        let input = vec![
            json!({"type": "function_call_output", "call_id": format!("call_{i}"),
            "output": format!("result {i}: sunny, 21 C, light wind from the west")}),
        ];
        let tools = json!([{"type": "function", "name": "weather", "description": "Weather of a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": null}]);
        let response = json!({"id": format!("resp_{i}"), "object": "response", "status": "completed",
            "previous_response_id": previous, "tools": tools, "output": [
                {"type": "reasoning", "id": format!("rs_{i}"), "summary": [],
                 "content": [{"type": "reasoning_text", "text": "I need the weather again."}]},
                {"type": "function_call", "id": format!("fc_{i}"), "call_id": format!("call_{}", i + 1),
                 "name": "weather", "arguments": "{\"city\":\"Paris\"}", "status": "completed"}]});
        Record {
            owner: owner.as_str().into(),
            created: now(),
            previous: previous.map(str::to_string),
            input,
            response,
        }
    }

    #[test]
    #[ignore = "a measurement: run it on its own, in release"]
    fn a_hundred_turns_continue_fast_and_ten_thousand_conversations_stay_small() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits {
            max_bytes: 1 << 30,
            max_age: Duration::from_secs(86_400),
        };
        let store = Store::open(Some(dir.path()), limits).unwrap();
        let owner = store.owner(b"key");
        let first = json!({"type": "message", "role": "user", "content": "Weather in Paris?"});
        let mut previous: Option<String> = None;
        for i in 0..100 {
            let mut record = turn(&owner, previous.as_deref(), i);
            if i == 0 {
                record.input = vec![first.clone()];
            }
            let id = format!("resp_{i}");
            store.put(&id, &record).unwrap();
            previous = Some(id);
        }
        let body = json!({"previous_response_id": "resp_99", "input": [{"type": "function_call_output",
            "call_id": "call_100", "output": "sunny"}], "tools": [{"type": "function", "name": "weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]});
        let runs = 50;
        let started = Instant::now();
        for _ in 0..runs {
            assert_eq!(store.chain("resp_99", &owner).unwrap().unwrap().len(), 100);
        }
        let chain = started.elapsed() / runs;
        println!("a 100-turn conversation read back from the store: {chain:?}");
        let started = Instant::now();
        for _ in 0..runs {
            let (parsed, _) = read(&body, &store, &owner, Api::Chat).unwrap();
            assert_eq!(parsed.ask.conversation.len(), 201);
        }
        let per = started.elapsed() / runs;
        println!("a 100-turn conversation read back and read as a request: {per:?} per request");

        let many = tempfile::tempdir().unwrap();
        let store = Store::open(Some(many.path()), limits).unwrap();
        let started = Instant::now();
        for c in 0..10_000 {
            let owner = store.owner(format!("key-{}", c % 10).as_bytes());
            let mut record = turn(&owner, None, c);
            record.input = vec![first.clone()];
            store.put(&format!("resp_c{c}"), &record).unwrap();
        }
        let took = started.elapsed();
        let size = std::fs::metadata(many.path().join(store::FILE_NAME))
            .unwrap()
            .len();
        println!(
            "10,000 one-turn conversations: {:.1} MiB on disk, written in {took:?} ({:?} each)",
            size as f64 / (1024.0 * 1024.0),
            took / 10_000
        );
    }
}
