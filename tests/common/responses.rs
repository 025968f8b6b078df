//! The Responses face (`/v1/responses`) in a test: the proxy in front of a fake upstream, a
//! request with two function tools, and readers of its answers (whole, and the named events of
//! a streamed one). Used by `tests/serve_responses.rs` and `tests/serve_responses_store.rs`.

use serde_json::{Value, json};
use tagloop::serve::ServeConfig;

use super::fake_server::FakeServer;

/// The proxy in front of `fake`, on a free port: `http://127.0.0.1:PORT`.
pub async fn proxy(fake: &FakeServer, tune: impl FnOnce(&mut ServeConfig)) -> String {
    let base = super::serve::proxy(fake, tune).await;
    base.trim_end_matches("/v1").to_string()
}

pub fn tools() -> Value {
    json!([
        {"type": "function", "name": "weather", "description": "Weather of a city.",
         "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
            "required": ["city"]}},
        {"type": "function", "name": "time", "description": "Local time of a city.",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
            "required": ["city"]}}
    ])
}

pub fn ask(extra: Value) -> Value {
    let mut body = json!({
        "model": "gpt-like",
        "instructions": "Answer briefly.",
        "input": "Weather in Paris?",
        "tools": tools(),
    });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    body
}

pub async fn send(
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<String>,
    key: Option<&str>,
) -> reqwest::Response {
    let mut req = reqwest::Client::new().request(method, format!("{base}{path}"));
    if let Some(body) = body {
        req = req.header("content-type", "application/json").body(body);
    }
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    req.send().await.expect("send")
}

pub async fn post_as(base: &str, body: &Value, key: Option<&str>) -> (u16, Value) {
    let r = send(
        base,
        reqwest::Method::POST,
        "/v1/responses",
        Some(body.to_string()),
        key,
    )
    .await;
    let status = r.status().as_u16();
    (status, r.json::<Value>().await.unwrap_or(Value::Null))
}

pub async fn post(base: &str, body: &Value) -> (u16, Value) {
    post_as(base, body, None).await
}

/// The named events of a streamed answer: (event, data), each data naming its event.
pub async fn stream(base: &str, body: &Value) -> Vec<(String, Value)> {
    let mut body = body.clone();
    body["stream"] = json!(true);
    let r = send(
        base,
        reqwest::Method::POST,
        "/v1/responses",
        Some(body.to_string()),
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    let text = r.text().await.expect("body");
    let events = super::serve::named_events(&text);
    let numbers: Vec<u64> = events
        .iter()
        .map(|(_, d)| d["sequence_number"].as_u64().expect("sequence_number"))
        .collect();
    assert_eq!(numbers, (0..events.len() as u64).collect::<Vec<_>>());
    events
}

pub const CALL: &str =
    "<thought>I need the weather.</thought>\n<action>weather(city=\"Paris\", days=2)</action>";

pub fn types(v: &Value) -> Vec<String> {
    v["output"]
        .as_array()
        .map(|o| {
            o.iter()
                .map(|i| i["type"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The request that continues `first` (a response that called `weather`) by its id, sending
/// only the call's output.
pub fn continuation(first: &Value) -> Value {
    json!({"model": "gpt-like", "tools": tools(), "previous_response_id": first["id"],
        "input": [{"type": "function_call_output", "call_id": first["output"][1]["call_id"],
                   "output": "Sunny, 21 °C"}]})
}

/// Asserts that `key` can neither continue (`next`), read nor delete the response `id` at
/// `base`, and learns nothing of it: the 400 and 404s an unknown id gets.
pub async fn assert_not_theirs(base: &str, next: &Value, id: &str, key: Option<&str>) {
    let (status, v) = post_as(base, next, key).await;
    assert_eq!(
        (status, &v["error"]["param"]),
        (400, &json!("previous_response_id")),
        "{v}"
    );
    let path = format!("/v1/responses/{id}");
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let r = send(base, method, &path, None, key).await;
        assert_eq!(r.status(), 404);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "not_found", "{v}");
    }
}
