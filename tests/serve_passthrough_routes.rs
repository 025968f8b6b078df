//! `tagloop serve`'s pass-through of what it does not answer itself (`src/serve/passthrough/`),
//! in front of the fake upstream's routes (`common/fake_server/passthrough.rs`): serve's key
//! checked first on every route, the upstream's key in its place, the body byte for byte, the
//! answer streamed back with the upstream key taken out, the limits of the other faces, and
//! serve's own routes first.

#![cfg(feature = "serve")]

mod common;

use std::time::Duration;

use serde_json::{Value, json};
use tagloop::secret::Secret;
use tagloop::serve::ServeConfig;

use common::fake_server::{FakeConfig, FakeServer, fake_embedding};
use common::serve::proxy;

const SERVE_KEY: &str = "sk-serve-own-key-0123456789";
const UPSTREAM_KEY: &str = "sk-upstream-key-abcdef987654";

/// serve with both keys in front of a fresh fake, tuned by `tune`.
async fn keyed(tune: impl FnOnce(&mut ServeConfig)) -> (FakeServer, String) {
    keyed_before(FakeConfig::default(), tune).await
}

/// [`keyed`] in front of a fake made by `fake`.
async fn keyed_before(
    fake: FakeConfig,
    tune: impl FnOnce(&mut ServeConfig),
) -> (FakeServer, String) {
    let fake = FakeServer::start(fake).await;
    let base = proxy(&fake, |cfg| {
        cfg.api_key = Some(Secret::new(SERVE_KEY));
        cfg.upstream_key = Secret::new(UPSTREAM_KEY);
        tune(cfg);
    })
    .await;
    (fake, base)
}

/// `method` `url` with `key` (as a bearer token) and `body`: status, headers, body.
async fn call(
    method: reqwest::Method,
    url: &str,
    key: Option<&str>,
    body: Option<(&str, Vec<u8>)>,
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let mut request = reqwest::Client::new().request(method, url);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if let Some((ct, bytes)) = body {
        request = request.header("content-type", ct).body(bytes);
    }
    let response = request.send().await.expect("send");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.expect("body").to_vec();
    (status, headers, bytes)
}

/// `GET path` with serve's key, written on the socket as it is: the response's status.
async fn raw_get(base: &str, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = root(base).trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {SERVE_KEY}\r\nConnection: close\r\n\r\n"
    );
    socket.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    socket.read_to_end(&mut answer).await.expect("read");
    let head = String::from_utf8_lossy(&answer);
    head.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn message(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    v["error"]["message"].as_str().unwrap_or("").to_owned()
}

/// The server's root (`http://127.0.0.1:PORT`) of a `…/v1` base.
fn root(base: &str) -> &str {
    base.strip_suffix("/v1").expect("a /v1 base")
}

#[tokio::test]
async fn without_serves_key_every_route_is_401_and_nothing_reaches_the_upstream() {
    for passthrough in [true, false] {
        let (fake, base) = keyed(|cfg| cfg.passthrough = passthrough).await;
        let r = root(&base);
        let embeddings = Some(("application/json", b"{\"input\":\"x\"}".to_vec()));
        let cases = [
            (
                reqwest::Method::POST,
                format!("{base}/embeddings"),
                embeddings,
            ),
            (
                reqwest::Method::GET,
                format!("{base}/models/fake-model"),
                None,
            ),
            (reqwest::Method::GET, format!("{base}/no/such/route"), None),
            (reqwest::Method::GET, format!("{r}/health"), None),
            (reqwest::Method::GET, format!("{r}/slots"), None),
            (reqwest::Method::GET, format!("{r}/"), None),
            (reqwest::Method::GET, format!("{base}/../slots"), None),
            // A route serve answers, asked with a method it does not answer: 401 before 405.
            (
                reqwest::Method::GET,
                format!("{base}/chat/completions"),
                None,
            ),
            (reqwest::Method::POST, format!("{base}/models"), None),
        ];
        for (method, url, body) in cases {
            for key in [None, Some("sk-wrong")] {
                let (status, _, got) = call(method.clone(), &url, key, body.clone()).await;
                assert_eq!(status, 401, "{method} {url} key={key:?}: {}", message(&got));
            }
        }
        assert!(fake.passed().is_empty(), "{:?}", fake.passed());
        assert_eq!(fake.request_count(), 0);
    }
}

#[tokio::test]
async fn embeddings_pass_through_under_the_upstream_key_with_the_bodys_headers_only() {
    let (fake, base) = keyed(|_| {}).await;
    let response = reqwest::Client::new()
        .post(format!("{base}/embeddings?api-version=1"))
        .bearer_auth(SERVE_KEY)
        .header("x-api-key", SERVE_KEY)
        .header("cookie", "session=1")
        .header("accept-encoding", "gzip")
        .header("openai-beta", "assistants=v2")
        .json(&json!({"model": "emb", "input": ["hello", "world!"]}))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 200);
    let v: Value = response.json().await.expect("json");
    assert_eq!(v["data"][1]["embedding"], json!(fake_embedding("world!")));
    let passed = fake.passed();
    assert_eq!(passed.len(), 1);
    let up = &passed[0];
    assert_eq!(up.method, "POST");
    assert_eq!(up.target, "/v1/embeddings?api-version=1");
    assert_eq!(
        up.headers["authorization"],
        format!("Bearer {UPSTREAM_KEY}").as_str()
    );
    assert_eq!(up.headers["openai-beta"], "assistants=v2");
    for dropped in ["x-api-key", "cookie", "accept-encoding"] {
        assert!(
            !up.headers.contains_key(dropped),
            "{dropped}: {:?}",
            up.headers
        );
    }
    assert!(
        !String::from_utf8_lossy(&up.body).contains(SERVE_KEY)
            && !format!("{:?}", up.headers).contains(SERVE_KEY),
        "serve's key went upstream"
    );
}

#[tokio::test]
async fn an_upload_passes_byte_for_byte_both_ways() {
    let (fake, base) = keyed(|_| {}).await;
    // Every byte value, not UTF-8, in a multipart body as an SDK writes it.
    let file: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    let mut body = b"--b0undary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\nContent-Type: audio/wav\r\n\r\n".to_vec();
    body.extend_from_slice(&file);
    body.extend_from_slice(b"\r\n--b0undary\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--b0undary--\r\n");
    let ct = "multipart/form-data; boundary=b0undary";
    let (status, headers, echoed) = call(
        reqwest::Method::POST,
        &format!("{base}/echo"),
        Some(SERVE_KEY),
        Some((ct, body.clone())),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], ct);
    assert!(echoed == body, "the answer is not the body sent back");
    let up = &fake.passed()[0];
    assert_eq!(up.headers["content-type"], ct);
    assert_eq!(
        up.headers["content-length"],
        body.len().to_string().as_str()
    );
    assert!(
        up.body[..] == body[..],
        "the upstream did not get the body as sent"
    );
}

#[tokio::test]
async fn the_upstream_key_is_taken_out_of_an_echo_even_split_across_pieces() {
    let (_fake, base) = keyed(|_| {}).await;
    let response = reqwest::Client::new()
        .get(format!("{base}/echo-key"))
        .bearer_auth(SERVE_KEY)
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-echo-auth"], "Bearer [redacted]");
    let text = response.text().await.expect("text");
    assert_eq!(text, "data: you sent Bearer [redacted] to me\n\n");
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_a_path_that_climbs_is_refused() {
    let (fake, base) = keyed(|_| {}).await;
    let (status, headers, body) = call(
        reqwest::Method::GET,
        &format!("{base}/redirect"),
        Some(SERVE_KEY),
        None,
    )
    .await;
    assert_eq!(status, 502, "{}", message(&body));
    assert!(message(&body).contains("redirect"), "{}", message(&body));
    assert!(!headers.contains_key("location"));
    // Written on the socket as they are: an HTTP client's URL parser would resolve the dots.
    for climb in [
        "/v1/%2e%2e/health",
        "/v1/models/..%2Fx",
        "/v1/./embeddings",
        "/v1/../health",
    ] {
        assert_eq!(raw_get(&base, climb).await, 400, "{climb}");
    }
    assert_eq!(fake.passed().len(), 1, "{:?}", fake.passed());
}

#[tokio::test]
async fn the_servers_own_routes_pass_only_from_their_list() {
    let llama = FakeConfig {
        tokenizer: true,
        ..FakeConfig::default()
    };
    let (fake, base) = keyed_before(llama, |_| {}).await;
    let r = root(&base);
    let (status, _, body) = call(
        reqwest::Method::GET,
        &format!("{r}/health"),
        Some(SERVE_KEY),
        None,
    )
    .await;
    assert_eq!(status, 200, "{}", message(&body));
    let tokenize = Some(("application/json", b"{\"content\":\"abcdefgh\"}".to_vec()));
    let (status, _, body) = call(
        reqwest::Method::POST,
        &format!("{r}/tokenize"),
        Some(SERVE_KEY),
        tokenize,
    )
    .await;
    assert_eq!(status, 200, "{}", message(&body));
    let tokenized = &fake.root_requests()[0];
    assert_eq!(tokenized.path, "/tokenize");
    assert_eq!(
        tokenized.authorization.as_deref(),
        Some(format!("Bearer {UPSTREAM_KEY}").as_str())
    );
    for (method, path) in [
        (reqwest::Method::GET, "/slots"),
        (reqwest::Method::POST, "/props"),
    ] {
        let (status, _, _) =
            call(method.clone(), &format!("{r}{path}"), Some(SERVE_KEY), None).await;
        assert_eq!(status, 404, "{method} {path}");
    }
}

#[tokio::test]
async fn with_the_switch_off_what_serve_does_not_answer_is_404() {
    let (fake, base) = keyed(|cfg| cfg.passthrough = false).await;
    let (status, _, body) = call(
        reqwest::Method::GET,
        &format!("{base}/models/fake-model"),
        Some(SERVE_KEY),
        None,
    )
    .await;
    assert_eq!(status, 404);
    assert!(
        message(&body).contains("passes nothing through"),
        "{}",
        message(&body)
    );
    assert!(fake.passed().is_empty());
    // What serve answers is still answered.
    let (status, _, _) = call(
        reqwest::Method::GET,
        &format!("{base}/models"),
        Some(SERVE_KEY),
        None,
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn serves_own_routes_keep_precedence_and_a_tools_less_chat_its_plain_path() {
    let (fake, base) = keyed(|_| {}).await;
    let chat = json!({"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]});
    let (status, _, _) = call(
        reqwest::Method::POST,
        &format!("{base}/chat/completions"),
        Some(SERVE_KEY),
        Some(("application/json", chat.to_string().into_bytes())),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(fake.requests()[0].path, "/v1/chat/completions");
    // Answered by serve, not by the fallback: nothing in the pass-through's record.
    assert!(fake.passed().is_empty(), "{:?}", fake.passed());
}

#[tokio::test]
async fn the_limits_of_the_other_faces_hold_and_no_transcript_is_written() {
    let dir = tempfile::tempdir().expect("dir");
    let (fake, base) = keyed(|cfg| {
        cfg.max_body = 1000;
        cfg.concurrency = 1;
        cfg.session_dir = Some(dir.path().to_owned());
    })
    .await;
    let big = Some(("application/octet-stream", vec![7u8; 1001]));
    let (status, _, _) = call(
        reqwest::Method::POST,
        &format!("{base}/echo"),
        Some(SERVE_KEY),
        big,
    )
    .await;
    assert_eq!(status, 413);
    assert!(fake.passed().is_empty());
    // A streamed answer holds its slot while it streams: a second request is 429.
    let mut streaming = reqwest::Client::new()
        .get(format!("{base}/stream?bytes=50000000"))
        .bearer_auth(SERVE_KEY)
        .send()
        .await
        .expect("send");
    assert_eq!(streaming.status(), 200);
    assert!(streaming.chunk().await.expect("chunk").is_some());
    let (status, _, _) = call(
        reqwest::Method::GET,
        &format!("{base}/health"),
        Some(SERVE_KEY),
        None,
    )
    .await;
    assert_eq!(status, 429);
    drop(streaming);
    // Let go once the client went away (bounded by a count of tries, not a clock).
    let mut status = 0;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        status = call(
            reqwest::Method::GET,
            &format!("{base}/models/x"),
            Some(SERVE_KEY),
            None,
        )
        .await
        .0;
        if status == 200 {
            break;
        }
    }
    assert_eq!(status, 200);
    let kept: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .flatten()
        .collect();
    assert!(
        kept.is_empty(),
        "a pass-through wrote a transcript: {kept:?}"
    );
}

#[tokio::test]
async fn server_sent_events_reach_the_client_as_the_upstream_sends_them() {
    let (_fake, base) = keyed(|_| {}).await;
    // Four events of 16 bytes, 150 ms apart.
    let mut response = reqwest::Client::new()
        .get(format!("{base}/stream?bytes=64&event=16&pace_ms=150"))
        .bearer_auth(SERVE_KEY)
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 200);
    let started = std::time::Instant::now();
    let mut arrivals = Vec::new();
    while let Some(piece) = response.chunk().await.expect("piece") {
        arrivals.push((started.elapsed(), piece.len()));
    }
    assert_eq!(arrivals.iter().map(|a| a.1).sum::<usize>(), 64);
    // Each event came on its own, when it was sent: not held until the answer ended.
    assert_eq!(arrivals.len(), 4, "{arrivals:?}");
    let spread = arrivals[3].0 - arrivals[0].0;
    assert!(spread >= Duration::from_millis(300), "{arrivals:?}");
}
