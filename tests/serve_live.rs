//! `tagloop serve` streaming what it knows as soon as it knows it (issue 26, item 2):
//!
//! * the streamed and the whole answer to the same upstream turn are the same once the chunks
//!   are put back together, on several shapes of turn (thought and answer, `<think>` blocks, a
//!   stop string the client side cuts, the server's own reasoning, a call, a repaired turn of
//!   which nothing may reach the client);
//! * the first content chunk reaches the client while the upstream is still writing the turn,
//!   shown by ordering: a small upstream of the test's own sends half the answer and waits until
//!   the test has read a content chunk from the proxy before it sends the rest;
//! * a streamed request that fails before anything was sent still gets its HTTP error.
#![cfg(feature = "serve")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::response::Response;
use axum::routing;
use common::fake_server::{FakeConfig, FakeServer, StopMode};
use futures::StreamExt;
use serde_json::{Value, json};
use tagloop::llm::GrammarMode;
use tagloop::serve::{ServeConfig, router};
use tokio::sync::Notify;

/// Serve `app` on a free loopback port: `http://127.0.0.1:PORT`.
use common::serve_on_loopback as spawn;

/// The proxy in front of the upstream at `upstream` (a `/v1` base URL).
async fn proxy(upstream: &str) -> String {
    let mut cfg = ServeConfig::new(upstream.to_string());
    cfg.model = Some("fake-model".into());
    cfg.grammar = GrammarMode::Off;
    let app = router(cfg).expect("router");
    format!("{}/v1", spawn(app).await)
}

fn ask(stream: bool) -> Value {
    json!({
        "model": "m",
        "stream": stream,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "weather",
            "description": "Weather of a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
              "required": ["city"]}}}],
    })
}

/// The `data:` payloads of an SSE body, comments skipped.
fn datas(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter(|e| !e.trim().is_empty() && !e.starts_with(':'))
        .filter_map(|e| e.strip_prefix("data: ").map(str::to_owned))
        .collect()
}

/// An answer reduced to what a client reads of it: reasoning, content, calls (name and
/// arguments; ids differ between answers), finish reason.
#[derive(Debug, PartialEq)]
struct Reassembled {
    reasoning: String,
    content: String,
    calls: Vec<(String, Value)>,
    finish: String,
}

fn from_message(v: &Value) -> Reassembled {
    let m = &v["choices"][0]["message"];
    let calls = m["tool_calls"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    let args = c["function"]["arguments"].as_str().expect("arguments");
                    (
                        c["function"]["name"].as_str().expect("name").to_owned(),
                        serde_json::from_str(args).expect("arguments parse"),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    Reassembled {
        reasoning: m["reasoning_content"].as_str().unwrap_or("").to_owned(),
        content: m["content"].as_str().unwrap_or("").to_owned(),
        calls,
        finish: v["choices"][0]["finish_reason"]
            .as_str()
            .expect("finish")
            .to_owned(),
    }
}

/// The chunks put back together, and how many content chunks there were.
fn from_chunks(datas: &[String]) -> (Reassembled, usize) {
    assert_eq!(
        datas.last().map(String::as_str),
        Some("[DONE]"),
        "{datas:?}"
    );
    let mut r = Reassembled {
        reasoning: String::new(),
        content: String::new(),
        calls: Vec::new(),
        finish: String::new(),
    };
    let mut content_chunks = 0;
    for d in &datas[..datas.len() - 1] {
        let c: Value = serde_json::from_str(d).expect("chunk");
        assert!(c.get("error").is_none(), "{c}");
        let delta = &c["choices"][0]["delta"];
        if let Some(t) = delta["reasoning_content"].as_str() {
            r.reasoning.push_str(t);
        }
        if let Some(t) = delta["content"].as_str() {
            r.content.push_str(t);
            content_chunks += 1;
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let args = call["function"]["arguments"].as_str().expect("arguments");
            r.calls.push((
                call["function"]["name"].as_str().expect("name").to_owned(),
                serde_json::from_str(args).expect("arguments parse"),
            ));
        }
        if let Some(f) = c["choices"][0]["finish_reason"].as_str() {
            r.finish = f.to_owned();
        }
    }
    (r, content_chunks)
}

async fn post(base: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/chat/completions"))
        .json(body)
        .send()
        .await
        .expect("post")
}

/// The whole answer and the streamed one (put back together, with its raw body) to the same
/// upstream turns, each from a fresh fake upstream configured by `cfg`.
async fn both(cfg: &FakeConfig) -> (Reassembled, Reassembled, usize, String) {
    let fake = FakeServer::start(cfg.clone()).await;
    let whole: Value = post(&proxy(&fake.base_url).await, &ask(false))
        .await
        .json()
        .await
        .expect("json");
    let fake = FakeServer::start(cfg.clone()).await;
    let r = post(&proxy(&fake.base_url).await, &ask(true)).await;
    assert_eq!(r.status(), 200);
    let body = r.text().await.expect("body");
    let (streamed, content_chunks) = from_chunks(&datas(&body));
    (from_message(&whole), streamed, content_chunks, body)
}

fn small_tokens(turns: &[&str]) -> FakeConfig {
    let mut cfg = FakeConfig::turns(turns.iter().copied());
    cfg.token_chars = 3;
    cfg
}

#[tokio::test]
async fn streamed_and_whole_answers_to_the_same_turn_are_equal() {
    let long = "The weather in Paris is mild today, with a light breeze from the west, \
                some clouds in the afternoon and no rain expected before the evening.";
    let mut ignored_stops = small_tokens(&[&format!(
        "<thought>Known.</thought><final_answer>{long}</final_answer>\n<observation>invented</observation> and more"
    )]);
    ignored_stops.stop_mode = StopMode::Ignore;
    let mut server_reasoning = small_tokens(&[&format!(
        "<thought>Then answer.</thought><final_answer>{long}</final_answer>"
    )]);
    server_reasoning.reasoning = Some("The server's own reasoning.".into());
    let cases: Vec<(&str, FakeConfig, &str)> = vec![
        (
            "thought and answer",
            small_tokens(&[&format!(
                "<thought>Paris weather is known.</thought>\n<final_answer>{long}</final_answer>"
            )]),
            "stop",
        ),
        (
            "think blocks",
            small_tokens(&[&format!(
                "<think>Let me think about Paris.</think>\n<thought>I know it.</thought>\n<final_answer>{long} <think>aside</think> Take a coat.</final_answer>"
            )]),
            "stop",
        ),
        (
            "a stop string cut on the client side",
            ignored_stops,
            "stop",
        ),
        ("the server's reasoning", server_reasoning, "stop"),
        (
            "a fenced turn",
            small_tokens(&[&format!("```\n<final_answer>{long}\n```")]),
            "stop",
        ),
        (
            "a call",
            small_tokens(&[
                r#"<thought>Look it up.</thought><action>weather(city="Paris")</action>"#,
            ]),
            "tool_calls",
        ),
    ];
    for (name, cfg, finish) in cases {
        let (whole, streamed, content_chunks, _) = both(&cfg).await;
        assert_eq!(streamed, whole, "{name}");
        assert_eq!(whole.finish, finish, "{name}");
        if finish == "stop" {
            assert!(
                whole.content.contains("no rain expected"),
                "{name}: {whole:?}"
            );
            // Passed on as it came, not in one piece at the end.
            assert!(
                content_chunks > 3,
                "{name}: {content_chunks} content chunks"
            );
        }
    }
}

#[tokio::test]
async fn nothing_of_a_corrected_turn_reaches_the_client() {
    let long = "It is mild in Paris today, with a light breeze and some clouds in the afternoon.";
    let cfg = small_tokens(&[
        r#"<thought>SECRET-FIRST-TURN: I will use a tool that does not exist.</thought><action>forecast(city="Paris")</action>"#,
        &format!("<thought>Second try.</thought><final_answer>{long}</final_answer>"),
    ]);
    let (whole, streamed, content_chunks, body) = both(&cfg).await;
    assert_eq!(streamed, whole);
    assert_eq!(whole.content, long);
    assert_eq!(whole.reasoning, "Second try.");
    assert!(content_chunks >= 2, "{content_chunks}");
    assert!(!body.contains("SECRET-FIRST-TURN"), "{body}");
    assert!(!body.contains("forecast"), "{body}");
}

#[tokio::test]
async fn an_answer_that_a_correction_may_replace_is_not_streamed() {
    // Under `tool_choice: required` an answer is corrected into a call: its text, streamable
    // under `auto`, must not reach the client.
    let cfg = small_tokens(&[
        "<thought>SECRET-ANSWER-THOUGHT</thought><final_answer>SECRET-ANSWER: it is mild in Paris today, with some clouds.</final_answer>",
        r#"<action>weather(city="Paris")</action>"#,
    ]);
    let fake = FakeServer::start(cfg).await;
    let mut body = ask(true);
    body["tool_choice"] = json!("required");
    let r = post(&proxy(&fake.base_url).await, &body).await;
    assert_eq!(r.status(), 200);
    let text = r.text().await.expect("body");
    assert!(!text.contains("SECRET-ANSWER"), "{text}");
    let (streamed, _) = from_chunks(&datas(&text));
    assert_eq!(
        streamed.calls,
        vec![("weather".into(), json!({"city": "Paris"}))]
    );
}

#[tokio::test]
async fn a_streamed_request_that_fails_before_any_text_gets_its_http_error() {
    let mut cfg = FakeConfig::turns(["no protocol here", "still none"]);
    cfg.default_reply = "never".into();
    let fake = FakeServer::start(cfg).await;
    let r = post(&proxy(&fake.base_url).await, &ask(true)).await;
    assert_eq!(r.status(), 502);
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["error"]["type"], "upstream_error");
}

/// An upstream of the test's own: one streamed chat turn, its answer in two halves, the second
/// sent only once `gate` is opened (or after a long safety delay, so that a failing test ends).
/// `finished` is set just before the second half is sent; `dropped` is notified when the
/// answer's body is dropped (sent whole, or its connection closed).
fn gated_upstream(gate: Arc<Notify>, finished: Arc<AtomicBool>, dropped: Arc<Notify>) -> Router {
    Router::new().route(
        "/v1/chat/completions",
        routing::post(move || {
            let gate = gate.clone();
            let finished = finished.clone();
            let dropped = dropped.clone();
            async move {
                let chunk = |text: &str| {
                    let c = json!({"id": "x", "object": "chat.completion.chunk", "created": 1,
                        "model": "fake-model",
                        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
                    format!("data: {c}\n\n")
                };
                let first = chunk(
                    "<thought>I know this.</thought><final_answer>The first half of the answer, long enough to be sent, ",
                );
                let second = chunk("and the second half.</final_answer>");
                let end = json!({"id": "x", "object": "chat.completion.chunk", "created": 1,
                    "model": "fake-model",
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
                let end = format!("data: {end}\n\ndata: [DONE]\n\n");
                let body = async_stream::stream! {
                    let _guard = OnDrop(dropped);
                    yield Ok::<_, std::io::Error>(first);
                    // The safety delay only ends a test that already failed (the proxy held
                    // the first half back); a passing test opens the gate.
                    let _ = tokio::time::timeout(Duration::from_secs(20), gate.notified()).await;
                    finished.store(true, Ordering::SeqCst);
                    yield Ok(second);
                    yield Ok(end);
                };
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from_stream(body))
                    .expect("response")
            }
        }),
    )
}

/// Notifies its `Notify` when dropped.
struct OnDrop(Arc<Notify>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

#[tokio::test]
async fn the_first_content_chunk_arrives_before_the_upstream_finished() {
    let gate = Arc::new(Notify::new());
    let finished = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(Notify::new());
    let upstream = spawn(gated_upstream(gate.clone(), finished.clone(), dropped)).await;
    let base = proxy(&format!("{upstream}/v1")).await;
    let r = post(&base, &ask(true)).await;
    assert_eq!(r.status(), 200);
    let mut bytes = r.bytes_stream();
    let mut body = String::new();
    let mut seen_content_before_end = None;
    while let Some(b) = bytes.next().await {
        body.push_str(std::str::from_utf8(&b.expect("bytes")).expect("utf-8"));
        if seen_content_before_end.is_none() && body.contains(r#""content":"#) {
            seen_content_before_end = Some(!finished.load(Ordering::SeqCst));
            gate.notify_one();
        }
    }
    assert_eq!(
        seen_content_before_end,
        Some(true),
        "the first content chunk came only after the upstream had finished: {body}"
    );
    let (r, _) = from_chunks(&datas(&body));
    assert_eq!(r.reasoning, "I know this.");
    assert_eq!(
        r.content,
        "The first half of the answer, long enough to be sent, and the second half."
    );
    assert_eq!(r.finish, "stop");
}

#[tokio::test]
async fn a_client_that_goes_away_mid_answer_stops_the_upstream_request() {
    let gate = Arc::new(Notify::new());
    let finished = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(Notify::new());
    let upstream = spawn(gated_upstream(gate, finished.clone(), dropped.clone())).await;
    let base = proxy(&format!("{upstream}/v1")).await;
    let r = post(&base, &ask(true)).await;
    let mut bytes = r.bytes_stream();
    let mut body = String::new();
    while let Some(b) = bytes.next().await {
        body.push_str(std::str::from_utf8(&b.expect("bytes")).expect("utf-8"));
        if body.contains(r#""content":"#) {
            break;
        }
    }
    drop(bytes);
    // The gate is never opened: the upstream's answer ends only by its connection closing
    // (or, were the proxy to keep reading, by the upstream's safety delay, which sets
    // `finished` first).
    dropped.notified().await;
    assert!(
        !finished.load(Ordering::SeqCst),
        "the proxy kept the upstream request after its client went away"
    );
}
