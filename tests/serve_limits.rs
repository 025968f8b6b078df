//! `tagloop serve`'s edges against a fake upstream: bad requests naming their field, the proxy's
//! key, the body and concurrency limits, listening beyond loopback, the upstream key kept out of
//! every answer and log line, the completions pass-through, an unreachable upstream.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use serde_json::{Value, json};
use tagloop::llm::GrammarMode;
use tagloop::secret::Secret;
use tagloop::serve::{ServeConfig, router};

use common::cli::Env;
use common::fake_server::{FakeConfig, FakeServer};
use common::serve::{ask, post, post_raw, proxy};

#[tokio::test]
async fn bad_requests_name_their_field() {
    let fake = FakeServer::start(FakeConfig::default()).await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post_raw(&base, "{not json".into(), None).await;
    assert_eq!(
        (status, &v["error"]["type"]),
        (400, &json!("invalid_request_error"))
    );
    assert!(v["error"]["param"].is_null());
    let cases = [
        (json!({"messages": null}), "messages"),
        (json!({"n": 2}), "n"),
        (
            json!({"tools": [{"type": "function", "function": {"description": "x"}}]}),
            "tools[0].function.name",
        ),
        (
            json!({"tools": [{"type": "function", "function": {"name": "x", "parameters": [1]}}]}),
            "tools[0].function.parameters",
        ),
        (
            json!({"tool_choice": {"type": "function", "function": {"name": "nope"}}}),
            "tool_choice.function.name",
        ),
        (json!({"tool_choice": "sometimes"}), "tool_choice"),
        // Read as serde types: a field of the wrong type is named by its path.
        (json!({"stream": "yes"}), "stream"),
        (
            json!({"stream_options": {"include_usage": "please"}}),
            "stream_options.include_usage",
        ),
        (json!({"max_tokens": -1}), "max_tokens"),
    ];
    for (extra, param) in cases {
        let (status, v) = post(&base, &ask(extra.clone())).await;
        assert_eq!(status, 400, "{extra}: {v}");
        assert_eq!(v["error"]["param"], param, "{extra}: {v}");
        assert_eq!(v["error"]["type"], "invalid_request_error");
    }
    assert_eq!(fake.request_count(), 0);
}

#[tokio::test]
async fn the_proxy_key_is_required_when_set() {
    let fake = FakeServer::start(FakeConfig::default()).await;
    let base = proxy(&fake, |c| c.api_key = Some(Secret::new("proxy-key"))).await;
    let body = ask(json!({})).to_string();
    let (status, v) = post_raw(&base, body.clone(), None).await;
    assert_eq!(status, 401, "{v}");
    let (status, _) = post_raw(&base, body.clone(), Some("proxy-kez")).await;
    assert_eq!(status, 401);
    let (status, _) = post_raw(&base, body, Some("proxy-key")).await;
    assert_eq!(status, 200);
    assert_eq!(fake.request_count(), 1);
}

#[tokio::test]
async fn a_body_over_the_limit_is_a_413() {
    let fake = FakeServer::start(FakeConfig::default()).await;
    let base = proxy(&fake, |c| c.max_body = 1000).await;
    let mut body = ask(json!({}));
    body["messages"][1]["content"] = json!("x".repeat(2000));
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 413, "{v}");
    assert_eq!(fake.request_count(), 0);
}

#[tokio::test]
async fn requests_beyond_the_concurrency_limit_get_429() {
    let fake = FakeServer::start(FakeConfig {
        first_byte_delay: std::time::Duration::from_millis(1500),
        ..FakeConfig::default()
    })
    .await;
    let base = proxy(&fake, |c| c.concurrency = 1).await;
    let first = tokio::spawn({
        let base = base.clone();
        async move { post(&base, &ask(json!({}))).await }
    });
    // The first request holds the one slot once the upstream has it.
    while fake.request_count() == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let (status, v) = post(&base, &ask(json!({}))).await;
    assert_eq!(status, 429, "{v}");
    assert_eq!(v["error"]["type"], "rate_limit_error");
    assert_eq!(first.await.unwrap().0, 200);
    assert_eq!(fake.request_count(), 1);
}

#[test]
fn the_binary_refuses_to_listen_beyond_loopback_without_a_key() {
    let env = Env::new();
    env.cmd()
        .args([
            "serve",
            "--upstream",
            "http://127.0.0.1:9/v1",
            "--listen",
            "0.0.0.0:0",
        ])
        .assert()
        .code(2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_key_is_in_no_answer_and_no_log_line() {
    const KEY: &str = "sk-upstream-0123456789abcdef";
    // The upstream refuses the key, so its error travels back through the proxy.
    let fake = FakeServer::start(FakeConfig {
        require_key: Some("another-key".into()),
        ..FakeConfig::default()
    })
    .await;
    let env = Env::new();
    let mut child = env
        .std_cmd()
        .args([
            "serve",
            "--upstream",
            &fake.base_url,
            "--listen",
            "127.0.0.1:0",
            "--model",
            "fake-model",
        ])
        .env("OPENAI_API_KEY", KEY)
        .env("RUST_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let addr = first
        .strip_prefix("tagloop serve: listening on ")
        .unwrap()
        .to_string();
    assert!(!addr.ends_with(":0"), "{first}");
    let base = format!("{addr}/v1");
    let (status, v) = post(&base, &ask(json!({}))).await;
    assert_eq!(status, 502, "{v}");
    assert!(!v.to_string().contains(KEY));
    // The key went upstream, and only there.
    assert_eq!(
        fake.requests()[0].authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    let (_, models) = {
        let r = reqwest::get(format!("{base}/models")).await.unwrap();
        (r.status(), r.text().await.unwrap())
    };
    assert!(!models.contains(KEY));
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("status=502"), "{log}");
    assert!(!log.contains(KEY), "{log}");
    assert!(out.status.success(), "{log}");
}

#[tokio::test]
async fn completions_requests_pass_through_the_real_router() {
    let fake = FakeServer::start(FakeConfig::turns(["once upon a time"])).await;
    let base = proxy(&fake, |c| c.api_key = Some(Secret::new("proxy-key"))).await;
    let body = json!({"model": "m", "prompt": "Tell me a story:", "max_tokens": 8});
    let send = |key: Option<&'static str>| {
        let mut req = reqwest::Client::new()
            .post(format!("{base}/completions"))
            .json(&body);
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        req.send()
    };
    assert_eq!(send(None).await.unwrap().status().as_u16(), 401);
    let r = send(Some("proxy-key")).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["choices"][0]["text"], "once upon a time", "{v}");
    let sent = fake.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].body["prompt"], "Tell me a story:");
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_502_that_names_no_address() {
    // Port 9 (discard) on loopback: nothing listens there.
    let mut cfg = ServeConfig::new("http://127.0.0.1:9/v1".to_string());
    cfg.model = Some("m".into());
    cfg.grammar = GrammarMode::Off;
    let app = router(cfg).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let (status, v) = post(&format!("http://{addr}/v1"), &ask(json!({}))).await;
    assert_eq!(status, 502, "{v}");
    assert_eq!(v["error"]["type"], "upstream_error");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("could not be reached"), "{message}");
    assert!(
        !message.contains("127.0.0.1") && !message.contains(":9"),
        "{message}"
    );
}
