//! `tagloop serve` in a test: the proxy in front of a fake upstream, a request with tools, and
//! readers of its answers (whole, and the `data:` events of a streamed one).

use serde_json::{Value, json};
use tagloop::llm::GrammarMode;
use tagloop::serve::{ServeConfig, router};

use super::fake_server::FakeServer;

/// The proxy in front of `fake`, on a free port: its base URL (`http://127.0.0.1:PORT/v1`).
pub async fn proxy(fake: &FakeServer, tune: impl FnOnce(&mut ServeConfig)) -> String {
    let mut cfg = ServeConfig::new(fake.base_url.clone());
    cfg.model = Some("fake-model".into());
    cfg.grammar = GrammarMode::Off;
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
