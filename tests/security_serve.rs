//! Security (issue 30, items 1, 5, 7 and 9): what a hostile client's request can make
//! `tagloop serve` spend.
//!
//! * **Schemas** (item 1): `pattern`s that compile to megabytes each (lookaround, long counted
//!   repetitions), or hundreds of them, in a request's tools or `response_format`, or a role's
//!   output schema; and a compile that stalls everyone else's requests on the async thread.
//! * **The model list** (item 5): an upstream list of megabytes parsed whole, outside the
//!   concurrency limit.
//! * **Streamed pass-through** (item 7): a stream without tools that let go of its slot and its
//!   deadline when its headers went out.
//! * **Model names** (item 9): made-up names that filled the client cache for good.
//! * **Compiled schemas** (issue 44 item 2): 128 tools of 760 properties (2.7 MB) cost +176 MiB
//!   to compile; subschemas and the body's objects are counted first now, and refused past
//!   their caps.
//!
//! Connections, headers and bodies (items 2 and 3) are in `security_serve_conns.rs`.
#![cfg(feature = "serve")]

mod common;

use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use common::fake_server::{FakeConfig, FakeServer};
use common::serve::proxy_on_one_thread as proxy;
use serde_json::{Map, Value, json};

fn chat(tools: Value) -> Value {
    json!({
        "model": "m",
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": tools,
    })
}

/// One tool whose parameters hold `count` string properties, each with the pattern `pattern`
/// (its `N` replaced by the property's number, so that no two are alike).
fn patterned_tools(count: usize, pattern: &str) -> Value {
    let props: Map<String, Value> = (0..count)
        .map(|i| {
            let p = pattern.replace('N', &i.to_string());
            (format!("p{i}"), json!({"type": "string", "pattern": p}))
        })
        .collect();
    json!([{"type": "function", "function": {"name": "f", "description": "d",
        "parameters": {"type": "object", "properties": props}}}])
}

async fn post(base: &str, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}/chat/completions"))
        .json(body)
        .send()
        .await
        .expect("send");
    let status = r.status().as_u16();
    (status, r.json::<Value>().await.unwrap_or(Value::Null))
}

async fn get_models(base: &str) -> (u16, Value) {
    let r = reqwest::get(format!("{base}/models")).await.expect("get");
    let status = r.status().as_u16();
    (status, r.json::<Value>().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookaround_patterns_are_refused_and_stall_no_other_request() {
    let fake = FakeServer::start(FakeConfig::default()).await;
    let base = proxy(&fake.base_url, |c| c.model = Some("fake-model".into()));
    // 30 patterns of the issue's kind (under the cap): 170 MiB and seconds of compiling on main, on
    // the proxy's one async thread.
    let hostile = chat(patterned_tools(30, r"(?=x)\w{100}yN"));
    let attack = tokio::spawn({
        let base = base.clone();
        async move { post(&base, &hostile).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let asked = Instant::now();
    let (status, _) = get_models(&base).await;
    let waited = asked.elapsed();
    assert_eq!(status, 200);
    // Generous (the target is 100 ms): the model list of a local upstream takes milliseconds.
    assert!(
        waited < Duration::from_secs(2),
        "GET /v1/models waited {waited:?}"
    );
    let (status, v) = attack.await.expect("attack");
    assert_eq!(status, 400, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("lookaround"), "{v}");
    assert!(message.contains("/properties/p0/pattern"), "{v}");
    assert_eq!(v["error"]["param"], "tools[0].function.parameters", "{v}");
    assert_eq!(fake.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pattern_past_the_size_limit_is_refused() {
    let fake = FakeServer::start(FakeConfig::default()).await;
    let base = proxy(&fake.base_url, |c| c.model = Some("fake-model".into()));
    let (status, v) = post(&base, &chat(patterned_tools(1, "[a-z]{100000}N"))).await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("KiB"),
        "{v}"
    );
    assert_eq!(fake.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_patterns_than_the_cap_are_refused_before_any_is_compiled() {
    let fake = FakeServer::start(FakeConfig::default()).await;
    let base = proxy(&fake.base_url, |c| c.model = Some("fake-model".into()));
    let cap = tagloop::schema::MAX_PATTERNS;
    // Spread over the tools and the answer's schema: the cap is the request's.
    let mut body = chat(patterned_tools(cap, "^aN$"));
    body["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "r",
        "schema": {"type": "object", "properties": {"x": {"type": "string", "pattern": "^b$"}}}}});
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["param"], "tools", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("at most {cap}")),
        "{v}"
    );
    // At the cap, with ordinary patterns, the request is answered.
    let (status, v) = post(&base, &chat(patterned_tools(cap, "^aN$"))).await;
    assert_eq!(status, 200, "{v}");
}

#[test]
fn a_role_output_schema_is_compiled_within_the_same_bounds() {
    // `run --output-schema`, `--role` files and a queued task's inline role all come here.
    let role = tagloop::agent::Role::new("r", "");
    let lookaround = json!({"type": "object", "properties": {
        "a": {"type": "string", "pattern": r"(?=x)\w{100}y"}}});
    let e = role.clone().with_output_schema(lookaround).unwrap_err();
    assert!(e.to_string().contains("lookaround"), "{e}");
    let many: Map<String, Value> = (0..=tagloop::schema::MAX_PATTERNS)
        .map(|i| {
            (
                format!("p{i}"),
                json!({"type": "string", "pattern": format!("^{i}$")}),
            )
        })
        .collect();
    let e = role
        .clone()
        .with_output_schema(json!({"type": "object", "properties": many}))
        .unwrap_err();
    assert!(e.to_string().contains("at most"), "{e}");
    assert!(
        role.with_output_schema(json!({"type": "string", "pattern": "^[a-z]+$"}))
            .is_ok()
    );
}

/// An upstream whose model list is `bytes` long.
async fn upstream_with_a_model_list_of(bytes: usize) -> String {
    let entries: Vec<Value> = (0..bytes / 60)
        .map(|i| json!({"id": format!("model-{i:010}"), "object": "model", "owned_by": "x"}))
        .collect();
    let list = json!({"object": "list", "data": entries}).to_string();
    let app = Router::new().route("/v1/models", get(move || async move { list.clone() }));
    format!("{}/v1", common::serve_on_loopback(app).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_list_over_a_mib_is_refused_unparsed() {
    let upstream = upstream_with_a_model_list_of(2 << 20).await;
    let base = proxy(&upstream, |_| {});
    let (status, v) = get_models(&base).await;
    assert_eq!(status, 502, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("MiB"),
        "{v}"
    );
    // A list under the cap is relayed.
    let upstream = upstream_with_a_model_list_of(100_000).await;
    let base = proxy(&upstream, |_| {});
    let (status, v) = get_models(&base).await;
    assert_eq!(status, 200, "{v}");
    assert!(v["data"].as_array().is_some_and(|d| d.len() > 1000), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_list_takes_a_concurrency_slot() {
    let fake = FakeServer::start(FakeConfig {
        first_byte_delay: Duration::from_millis(1500),
        ..FakeConfig::default()
    })
    .await;
    let base = proxy(&fake.base_url, |c| c.concurrency = 1);
    let first = tokio::spawn({
        let base = base.clone();
        async move { post(&base, &chat(patterned_tools(1, "^aN$"))).await }
    });
    while fake.request_count() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (status, v) = get_models(&base).await;
    assert_eq!(status, 429, "{v}");
    assert_eq!(first.await.expect("first").0, 200);
    let (status, v) = get_models(&base).await;
    assert_eq!(status, 200, "{v}");
}

/// An upstream that streams 50 events 100 ms apart to a request with `"stream": true`, and
/// answers any other at once.
async fn slow_streaming_upstream() -> String {
    async fn complete(body: axum::Json<Value>) -> axum::response::Response {
        use axum::response::IntoResponse;
        if body["stream"] != json!(true) {
            return axum::Json(json!({"id": "c", "object": "chat.completion", "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "hi"},
                 "finish_reason": "stop"}]}))
            .into_response();
        }
        let events = futures::stream::unfold(0u32, |i| async move {
            if i == 50 {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            let event = json!({"object": "chat.completion.chunk", "choices": [
                {"index": 0, "delta": {"content": "x"}, "finish_reason": null}]});
            let bytes = axum::body::Bytes::from(format!("data: {event}\n\n"));
            Some((Ok::<_, std::io::Error>(bytes), i + 1))
        });
        axum::response::Response::builder()
            .header("content-type", "text/event-stream")
            .body(axum::body::Body::from_stream(events))
            .unwrap_or_default()
    }
    let app = Router::new().route("/v1/chat/completions", axum::routing::post(complete));
    format!("{}/v1", common::serve_on_loopback(app).await)
}

/// A request without tools (passed through), read to its end: the status and the body's text.
async fn pass_through(base: &str, stream: bool) -> (u16, String) {
    let body = json!({"model": "m", "stream": stream,
        "messages": [{"role": "user", "content": "hi"}]});
    let r = reqwest::Client::new()
        .post(format!("{base}/chat/completions"))
        .json(&body)
        .send()
        .await
        .expect("send");
    let status = r.status().as_u16();
    (status, r.text().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_pass_through_holds_its_slot_and_deadline_to_its_end() {
    let upstream = slow_streaming_upstream().await;
    let base = proxy(&upstream, |c| {
        c.concurrency = 1;
        c.timeout = Duration::from_millis(1500);
    });
    let started = Instant::now();
    let first = tokio::spawn({
        let base = base.clone();
        async move { pass_through(&base, true).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The first stream's headers are out; it still holds the one slot.
    let (status, text) = pass_through(&base, false).await;
    assert_eq!(status, 429, "{text}");
    let (status, text) = first.await.expect("first");
    assert_eq!(status, 200);
    let took = started.elapsed();
    // Ended by the request's 1.5 s limit, not the upstream's 5 s stream.
    assert!(
        took < Duration::from_millis(3000),
        "the stream took {took:?}"
    );
    assert!(text.contains("time limit"), "{text}");
    assert!(text.matches("\"x\"").count() < 30, "{text}");
    // The slot is free again.
    let (status, text) = pass_through(&base, false).await;
    assert_eq!(status, 200, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_model_names_never_lock_out_a_new_one() {
    let fake = FakeServer::start(FakeConfig::default()).await;
    let base = proxy(&fake.base_url, |_| {});
    for i in 0..40 {
        let mut body = chat(patterned_tools(1, "^aN$"));
        body["model"] = json!(format!("made-up-{i}"));
        let (status, v) = post(&base, &body).await;
        assert_eq!(status, 200, "name {i}: {v}");
    }
    let mut body = chat(patterned_tools(1, "^aN$"));
    body["model"] = json!("the-real-one");
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_of_countless_tiny_values_is_refused_before_it_is_built() {
    // 4 MiB of `{}`: +101 MiB while serve built it into a JSON value (a map each), with or
    // without tools. Counted first now, and refused; the upstream never hears of it. (Numbers
    // here: objects past the body's 40,000 are refused on their own count, below.)
    let fake = FakeServer::start(FakeConfig::default()).await;
    let base = proxy(&fake.base_url, |c| c.model = Some("fake-model".into()));
    let n = (4 << 20) / 2 - 100;
    let tiny = format!(
        "{{\"model\": \"m\", \"messages\": [{{\"role\": \"user\", \"content\": \"hi\"}}], \"x\": [{}]}}",
        vec!["1"; n].join(",")
    );
    let r = reqwest::Client::new()
        .post(format!("{base}/chat/completions"))
        .header("content-type", "application/json")
        .body(tiny)
        .send()
        .await
        .expect("send");
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().await.expect("json");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("200000 JSON values"), "{v}");
    assert_eq!(fake.request_count(), 0);
    // An ordinary request is still answered.
    let (status, v) = post(&base, &chat(patterned_tools(2, "^aN$"))).await;
    assert_eq!(status, 200, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_past_the_subschema_cap_are_refused_before_they_are_built() {
    let fake = FakeServer::start(FakeConfig::default()).await;
    let base = proxy(&fake.base_url, |c| c.model = Some("fake-model".into()));
    let tools = |count: usize, props: usize| -> Value {
        let props: Map<String, Value> = (0..props)
            .map(|i| (format!("p{i}"), json!({"type": "string"})))
            .collect();
        let tool = |t: usize| {
            json!({"type": "function", "function": {"name": format!("t{t}"),
            "parameters": {"type": "object", "properties": props.clone()}}})
        };
        Value::Array((0..count).map(tool).collect())
    };
    // The issue's 2.7 MB request: 97,000 objects, refused before the body is built.
    let (status, v) = post(&base, &chat(tools(128, 760))).await;
    assert_eq!(status, 400, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("40000 JSON objects"), "{v}");
    // Under the body's cap, over the subschemas': refused before any is compiled.
    let (status, v) = post(&base, &chat(tools(128, 200))).await;
    assert_eq!(status, 400, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    let cap = tagloop::schema::MAX_SCHEMA_NODES;
    assert!(message.contains(&format!("at most {cap}")), "{v}");
    assert!(message.contains("subschemas"), "{v}");
    assert_eq!(v["error"]["param"], "tools", "{v}");
    assert_eq!(fake.request_count(), 0);
    // Many tools of a real size are still answered.
    let (status, v) = post(&base, &chat(tools(128, 20))).await;
    assert_eq!(status, 200, "{v}");
}
