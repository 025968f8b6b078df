//! `tagloop serve` in a test: the proxy in front of a fake upstream, a request with tools, and
//! readers of its answers (whole, and the `data:` events of a streamed one).

use serde_json::{Value, json};
use tagloop::llm::GrammarMode;
use tagloop::policy::{Policies, Policy};
use tagloop::serve::{ServeConfig, router};

use super::fake_server::FakeServer;

/// The proxy in front of `fake`, on a free port: its base URL (`http://127.0.0.1:PORT/v1`).
pub async fn proxy(fake: &FakeServer, tune: impl FnOnce(&mut ServeConfig)) -> String {
    let mut cfg = ServeConfig::new(fake.base_url.clone());
    cfg.model = Some("fake-model".into());
    cfg.grammar = GrammarMode::Off;
    // The fake turns fill `weather`'s optional `days`, which the shared question never gives:
    // the unsaid-optional policy would leave it out of every such call. Its own tests switch it
    // on (`policy_switches_serve.rs`, `serve/unsaid.rs`); a test here may too, in `tune`.
    cfg.policies = Policies::all().without(Policy::UnsaidOptional);
    tune(&mut cfg);
    let app = router(cfg).expect("router");
    format!("{}/v1", super::serve_on_loopback(app).await)
}

/// Two tools: `weather` (a city, days from 1) and `time` (a city).
pub fn weather_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "weather", "description": "Weather of a city.",
          "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
            "required": ["city"]}}},
        {"type": "function", "function": {"name": "time", "description": "Local time of a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
            "required": ["city"]}}}
    ])
}

/// A chat request about the weather with [`weather_tools`], `extra` merged in.
pub fn ask(extra: Value) -> Value {
    let mut body = json!({
        "model": "m",
        "messages": [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "Weather in Paris?"}
        ],
        "tools": weather_tools(),
    });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    body
}

/// POST `body` to the proxy's `/chat/completions`: the status and the JSON answer.
pub async fn post(base: &str, body: &Value) -> (u16, Value) {
    post_raw(base, body.to_string(), None).await
}

/// POST a raw body, with the proxy's key when given: the status and the JSON answer.
pub async fn post_raw(base: &str, body: String, key: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .post(format!("{base}/chat/completions"))
        .header("content-type", "application/json")
        .body(body);
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let v = r.json::<Value>().await.unwrap_or(Value::Null);
    (status, v)
}

/// The first choice's message.
pub fn message(v: &Value) -> &Value {
    &v["choices"][0]["message"]
}

/// The `data:` payload of every event of an SSE body (comments skipped); every event must hold
/// exactly one `data:` line.
pub fn datas(body: &str) -> Vec<String> {
    assert!(body.ends_with("\n\n"), "the body ends mid-event: {body:?}");
    body.split("\n\n")
        .filter(|e| !e.is_empty())
        .filter(|e| !e.starts_with(':'))
        .map(|e| {
            let lines: Vec<&str> = e.lines().collect();
            assert_eq!(lines.len(), 1, "one data line per event: {e:?}");
            lines[0]
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data line: {e:?}"))
                .to_owned()
        })
        .collect()
}

/// The first choice's delta of a streamed chunk.
pub fn delta(c: &Value) -> &Value {
    &c["choices"][0]["delta"]
}

/// The one transcript `--session-dir` holds after a single request.
pub fn the_transcript(dir: &std::path::Path) -> Value {
    let files: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "{files:?}");
    serde_json::from_slice(&std::fs::read(files[0].path()).unwrap()).unwrap()
}

/// `tagloop serve` (the library's [`tagloop::serve::serve`]) in front of `upstream`, on its own
/// thread with a one-thread runtime as the CLI runs it, so that work done on the async thread
/// shows as other requests waiting. Its base URL (`http://127.0.0.1:PORT/v1`).
pub fn proxy_on_one_thread(upstream: &str, tune: impl FnOnce(&mut ServeConfig)) -> String {
    let mut cfg = ServeConfig::new(upstream);
    cfg.grammar = GrammarMode::Off;
    tune(&mut cfg);
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    std_listener.set_nonblocking(true).expect("nonblocking");
    let addr = std_listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).expect("listener");
            let _ = tagloop::serve::serve(listener, cfg, std::future::pending()).await;
        });
    });
    format!("http://{addr}/v1")
}

/// The text of every message of an upstream chat request, joined (`[role] content` lines).
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

/// The named events of an SSE body (`event:` and `data:` lines; comments skipped) as
/// (event, data); each event's data must name its event in `type`.
pub fn named_events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
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
        .collect()
}

/// The upstream's prompt (`sent`, from [`sent_text`]) of a history in which the assistant
/// thought "I look both up.", called weather and time for Paris in one turn, and got the
/// weather's result "Sunny, 21 °C": every face renders it so.
pub fn assert_sent_two_calls(sent: &str) {
    assert!(
        sent.contains("<thought>I look both up.</thought>"),
        "{sent}"
    );
    assert!(
        sent.contains(
            "<action>weather(city=\"Paris\")</action>\n<action>time(city=\"Paris\")</action>"
        ),
        "{sent}"
    );
    assert!(sent.contains("Result of weather:\nSunny, 21 °C"), "{sent}");
}

/// POST to the proxy at `base` (`http://127.0.0.1:PORT`) the chat twin of each face's test
/// conversation — instructions "Answer briefly.", the question "Weather in Paris?", one call
/// of weather for Paris and its result "Sunny", at temperature 0 and 99 tokens — with `tools`
/// (a face's list: `name`, `description`, and the schema under `schema_field`) as chat
/// function tools; it must be answered. The upstream then holds the request each face's twin
/// must send byte for byte.
pub async fn post_chat_twin(base: &str, tools: &Value, schema_field: &str) {
    let chat_tools: Vec<Value> = tools
        .as_array()
        .map(|list| {
            list.iter()
                .map(|t| {
                    json!({"type": "function", "function": {"name": t["name"],
                    "description": t["description"], "parameters": t[schema_field]}})
                })
                .collect()
        })
        .unwrap_or_default();
    let chat = json!({
        "model": "m", "max_tokens": 99, "temperature": 0, "tools": chat_tools,
        "messages": [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "Sunny"}]
    });
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&chat)
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 200);
}

/// The answer of [`fake_answering_in_pieces`].
pub const PIECES: &str = "Paris is sunny today, with a light wind from the west and about twenty-one degrees in the afternoon.";

/// A fake upstream that answers [`PIECES`] after a thought, four characters a delta: a face
/// streams it in several text deltas.
pub async fn fake_answering_in_pieces() -> FakeServer {
    FakeServer::start(super::fake_server::FakeConfig {
        token_chars: 4,
        ..super::fake_server::FakeConfig::turns([format!(
            "<thought>Known.</thought><final_answer>{PIECES}</final_answer>"
        )])
    })
    .await
}

/// A turn the core refuses (`days` below its minimum), whose thought must never reach a
/// client: a fake upstream that writes it, then `good`.
pub async fn fake_corrected_once(good: &str) -> FakeServer {
    let bad = "<thought>LEAKED-THOUGHT</thought><action>weather(city=\"Paris\", days=0)</action>";
    FakeServer::start(super::fake_server::FakeConfig::turns([bad, good])).await
}

/// What a client got from [`fake_corrected_once`] (its events' data, as text): nothing of the
/// refused turn, the corrected turn's thought ("I need the weather."), after two requests.
pub fn assert_corrected_once(all: &str, fake: &FakeServer) {
    assert!(!all.contains("LEAKED"), "{all}");
    assert!(all.contains("I need the weather."), "{all}");
    assert_eq!(fake.request_count(), 2);
}
