//! What `tagloop serve` adds to a request: p50 and p90 of N sequential requests straight to a
//! fake upstream that answers at once, and of the same number through the proxy in front of
//! it (one upstream turn each, read, bound, validated and answered as `tool_calls`).
//!
//! ```text
//! cargo run --release --example serve_latency -- 500
//! ```

#[path = "../tests/common/fake_server/mod.rs"]
mod fake_server;

use std::time::{Duration, Instant};

use fake_server::{FakeConfig, FakeServer};
use serde_json::{Value, json};
use tagloop::llm::GrammarMode;
use tagloop::serve::{ServeConfig, router};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn time(n: usize, client: &reqwest::Client, url: &str, body: &Value) -> Vec<Duration> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let r = client.post(url).json(body).send().await.expect("request");
        assert!(r.status().is_success(), "{}", r.status());
        r.bytes().await.expect("body");
        times.push(started.elapsed());
    }
    times.sort();
    times
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(500);
    let fake = FakeServer::start(FakeConfig {
        default_reply:
            "<thought>Look it up.</thought>\n<action>weather(city=\"Paris\", days=2)</action>"
                .into(),
        chunk_bytes: 1 << 16,
        token_chars: 1 << 16,
        ..FakeConfig::default()
    })
    .await;
    let mut cfg = ServeConfig::new(fake.base_url.clone());
    cfg.model = Some("fake-model".into());
    cfg.grammar = GrammarMode::Off;
    let app = router(cfg).expect("router");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });

    let tools = json!([{"type": "function", "function": {"name": "weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"},
        "days": {"type": "integer"}}, "required": ["city"]}}}]);
    let through = json!({"model": "m", "tools": tools,
        "messages": [{"role": "user", "content": "Weather in Paris?"}]});
    // The same size of prompt as the proxy sends, straight to the upstream.
    let direct = json!({"model": "fake-model", "stream": true,
        "messages": [{"role": "system", "content": "x".repeat(2500)},
                     {"role": "user", "content": "Weather in Paris?"}]});
    let client = reqwest::Client::new();
    let base = format!("{}/chat/completions", fake.base_url);
    let proxy = format!("http://{addr}/v1/chat/completions");
    // Warm both paths (connections, the proxy's upstream client).
    time(20, &client, &base, &direct).await;
    time(20, &client, &proxy, &through).await;
    let d = time(n, &client, &base, &direct).await;
    let p = time(n, &client, &proxy, &through).await;
    let ms = |x: Duration| x.as_secs_f64() * 1e3;
    println!("requests: {n} each, sequential");
    println!(
        "direct  p50 {:.3} ms  p90 {:.3} ms",
        ms(percentile(&d, 0.5)),
        ms(percentile(&d, 0.9))
    );
    println!(
        "proxy   p50 {:.3} ms  p90 {:.3} ms",
        ms(percentile(&p, 0.5)),
        ms(percentile(&p, 0.9))
    );
    println!(
        "added   p50 {:.3} ms",
        ms(percentile(&p, 0.5)) - ms(percentile(&d, 0.5))
    );
}
