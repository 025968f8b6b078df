//! The Responses face (`/v1/responses`) in a test: the proxy in front of a fake upstream, a
//! request with two function tools, and readers of its answers (whole, and the named events of
//! a streamed one). Used by `tests/serve_responses.rs` and `tests/serve_responses_store.rs`.

use serde_json::{Value, json};
use tagloop::llm::GrammarMode;
use tagloop::serve::{ServeConfig, router};

use super::fake_server::FakeServer;

/// The proxy in front of `fake`, on a free port: `http://127.0.0.1:PORT`.
pub async fn proxy(fake: &FakeServer, tune: impl FnOnce(&mut ServeConfig)) -> String {
    let mut cfg = ServeConfig::new(fake.base_url.clone());
    cfg.model = Some("fake-model".into());
    cfg.grammar = GrammarMode::Off;
    tune(&mut cfg);
    let app = router(cfg).expect("router");
    super::serve_on_loopback(app).await
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
    let events: Vec<(String, Value)> = text
        .split("\n\n")
        .filter(|e| !e.trim().is_empty() && !e.starts_with(':'))
        .map(|e| {
            let name = e
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap_or("");
            let data = e
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap_or("null");
            let data: Value = serde_json::from_str(data).unwrap_or_else(|_| panic!("{e}"));
            assert_eq!(data["type"], name, "the data names its event: {e}");
            (name.to_string(), data)
        })
        .collect();
    let numbers: Vec<u64> = events
        .iter()
        .map(|(_, d)| d["sequence_number"].as_u64().expect("sequence_number"))
        .collect();
    assert_eq!(numbers, (0..events.len() as u64).collect::<Vec<_>>());
    events
}

/// Every upstream message's text, joined.
pub fn sent_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| format!("[{}] {}", m["role"], m["content"].as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
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
