//! `tagloop serve`'s pass-through, driven on its own: `Upstream` in front of the fake upstream
//! (`common/fake_server/`) or of a small router written here for one misbehaviour (a redirect, a
//! key echoed back, an endless stream, no model list).

#![cfg(feature = "serve")]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use futures::StreamExt;
use serde_json::{Value, json};
use tagloop::secret::Secret;
use tagloop::serve::testing::{Upstream, UpstreamLimits};

use common::fake_server::{FakeConfig, FakeServer};
use common::serve::datas;
/// Serve `app` on a free loopback port: `http://127.0.0.1:PORT`.
use common::serve_on_loopback as spawn;

const UPSTREAM_KEY: &str = "sk-upstream-0123456789abcdef";

const PROXY_KEY: &str = "sk-proxy-key-fedcba9876543210";

// ---------------------------------------------------------------------------------------------
// Pass-through
// ---------------------------------------------------------------------------------------------

/// The proxy's routes in front of `upstream`, as the core mounts them.
async fn proxy(upstream: Upstream) -> String {
    let up = Arc::new(upstream);
    let (a, b, c) = (up.clone(), up.clone(), up);
    let app = Router::new()
        .route(
            "/v1/chat/completions",
            post(move |body: Bytes| async move { a.pass_through(body).await }),
        )
        .route(
            "/v1/completions",
            post(move |body: Bytes| async move { b.pass_through_completions(body).await }),
        )
        .route("/v1/models", get(move || async move { c.models().await }));
    spawn(app).await
}

async fn upstream_proxy(base_url: &str) -> String {
    proxy(Upstream::new(base_url, Secret::new(UPSTREAM_KEY), None).expect("upstream")).await
}

/// POST `body` with the proxy's key, as a client of the proxy does: status, content-type, body.
async fn post_json(url: &str, body: &Value) -> (u16, String, Vec<u8>) {
    let response = reqwest::Client::new()
        .post(url)
        .bearer_auth(PROXY_KEY)
        .header("x-client-header", "client-only")
        .json(body)
        .send()
        .await
        .expect("send");
    let status = response.status().as_u16();
    let ct = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    // What arrived before the body broke off, if it did.
    let mut bytes = Vec::new();
    let mut response = response;
    while let Ok(Some(chunk)) = response.chunk().await {
        bytes.extend_from_slice(&chunk);
    }
    (status, ct, bytes)
}

fn chat_body(stream: bool) -> Value {
    json!({"model": "fake-model", "messages": [{"role": "user", "content": "héllo"}],
           "stream": stream, "stream_options": {"include_usage": true}, "temperature": 0.5})
}

/// The OpenAI error object's message of a body (panics when the body is not one).
fn error_message(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).expect("error object");
    v["error"]["message"].as_str().expect("message").to_owned()
}

#[tokio::test]
async fn whole_and_streamed_answers_are_relayed_byte_for_byte() {
    for stream in [false, true] {
        let reply = "<final_answer>ünïcode ok</final_answer>";
        let direct_server = FakeServer::start(FakeConfig::turns([reply])).await;
        let server = FakeServer::start(FakeConfig::turns([reply])).await;
        let body = chat_body(stream);
        let direct = post_json(
            &format!("{}/chat/completions", direct_server.base_url),
            &body,
        )
        .await;
        let base = upstream_proxy(&server.base_url).await;
        let relayed = post_json(&format!("{base}/v1/chat/completions"), &body).await;
        assert_eq!(relayed.0, 200, "stream={stream}");
        assert_eq!(relayed, direct, "stream={stream}");
        if stream {
            assert!(relayed.1.starts_with("text/event-stream"));
            assert!(String::from_utf8_lossy(&relayed.2).ends_with("data: [DONE]\n\n"));
        }
        // The body reached the upstream unchanged.
        let got = server.requests();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].path, "/v1/chat/completions");
        assert_eq!(got[0].body, body, "stream={stream}");
    }
}

#[tokio::test]
async fn completions_are_relayed_too() {
    let server = FakeServer::start(FakeConfig::turns(["text"])).await;
    let base = upstream_proxy(&server.base_url).await;
    let body = json!({"model": "fake-model", "prompt": "Once", "max_tokens": 5});
    let (status, _, bytes) = post_json(&format!("{base}/v1/completions"), &body).await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_slice(&bytes).expect("json");
    assert_eq!(v["choices"][0]["text"], "text");
    assert_eq!(server.requests()[0].path, "/v1/completions");
}

#[tokio::test]
async fn the_upstream_gets_the_upstream_key_never_the_clients() {
    for stream in [false, true] {
        let server = FakeServer::start(FakeConfig {
            require_key: Some(UPSTREAM_KEY.into()),
            ..FakeConfig::default()
        })
        .await;
        let base = upstream_proxy(&server.base_url).await;
        let (status, _, _) =
            post_json(&format!("{base}/v1/chat/completions"), &chat_body(stream)).await;
        assert_eq!(status, 200, "stream={stream}");
        let r = &server.requests()[0];
        assert_eq!(
            r.authorization.as_deref(),
            Some(format!("Bearer {UPSTREAM_KEY}").as_str())
        );
        // None of the client's headers goes through.
        assert!(
            !r.header_names.iter().any(|h| h == "x-client-header"),
            "{:?}",
            r.header_names
        );
    }
    // With no upstream key, no Authorization at all (the client's is not passed on instead).
    let server = FakeServer::start(FakeConfig::default()).await;
    let up = Upstream::new(&server.base_url, Secret::default(), None).expect("upstream");
    let base = proxy(up).await;
    let (status, _, _) = post_json(&format!("{base}/v1/chat/completions"), &chat_body(false)).await;
    assert_eq!(status, 200);
    assert_eq!(server.requests()[0].authorization, None);
    // The model list is asked with the upstream key as well.
    let base = upstream_proxy(&server.base_url).await;
    let list = reqwest::get(format!("{base}/v1/models"))
        .await
        .expect("get");
    assert_eq!(list.status(), 200);
    assert_eq!(
        server.model_lists(),
        [Some(format!("Bearer {UPSTREAM_KEY}"))]
    );
}

/// A small upstream for one misbehaviour: records each request's Authorization, answers with
/// `answer`.
async fn odd_upstream<F>(answer: F) -> (String, Arc<Mutex<Vec<Option<String>>>>)
where
    F: Fn(Option<String>) -> Response + Clone + Send + Sync + 'static,
{
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = {
        let seen = seen.clone();
        move |headers: HeaderMap| {
            let auth = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            seen.lock().expect("lock").push(auth.clone());
            auth
        }
    };
    let (r1, a1, r2, a2) = (record.clone(), answer.clone(), record, answer);
    let app = Router::new().fallback(
        post(move |h: HeaderMap| async move { a1(r1(h)) })
            .get(move |h: HeaderMap| async move { a2(r2(h)) }),
    );
    let base = spawn(app).await;
    (format!("{base}/v1"), seen)
}

#[tokio::test]
async fn a_redirect_is_neither_followed_nor_relayed() {
    let (elsewhere, seen_elsewhere) =
        odd_upstream(|_| Response::new(Body::from("{\"data\": []}"))).await;
    for status in [301u16, 302, 307, 308] {
        let to = format!("{elsewhere}/chat/completions");
        let (entry, seen_entry) = odd_upstream(move |_| {
            Response::builder()
                .status(status)
                .header("location", to.as_str())
                .body(Body::empty())
                .expect("response")
        })
        .await;
        let base = upstream_proxy(&entry).await;
        for stream in [false, true] {
            let (code, _, body) =
                post_json(&format!("{base}/v1/chat/completions"), &chat_body(stream)).await;
            assert_eq!(code, 502, "{status} stream={stream}");
            assert!(error_message(&body).contains("redirect"), "{status}");
        }
        let models = reqwest::get(format!("{base}/v1/models"))
            .await
            .expect("get");
        assert_eq!(models.status(), 502, "{status}");
        assert_eq!(seen_entry.lock().expect("lock").len(), 3);
    }
    assert!(
        seen_elsewhere.lock().expect("lock").is_empty(),
        "a redirect was followed"
    );
}

#[tokio::test]
async fn an_upstream_that_echoes_the_key_does_not_hand_it_to_the_client() {
    let (entry, _) = odd_upstream(|auth| {
        let echoed = json!({"error": {"message": format!("Incorrect API key provided: {}", auth.unwrap_or_default()), "type": "invalid_request_error"}});
        Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .header("content-type", "application/json")
            .body(Body::from(echoed.to_string()))
            .expect("response")
    })
    .await;
    let base = upstream_proxy(&entry).await;
    let (status, ct, body) =
        post_json(&format!("{base}/v1/chat/completions"), &chat_body(false)).await;
    // The upstream's failure is relayed (status, type, message)...
    assert_eq!(status, 401);
    assert_eq!(ct, "application/json");
    let text = String::from_utf8_lossy(&body).into_owned();
    assert!(text.contains("Incorrect API key provided"), "{text}");
    // ... without the key.
    assert!(!text.contains(UPSTREAM_KEY), "{text}");
    assert!(text.contains("[redacted]"), "{text}");
    let list = reqwest::get(format!("{base}/v1/models"))
        .await
        .expect("get");
    assert_eq!(list.status(), 401);
    let text = list.text().await.expect("text");
    assert!(!text.contains(UPSTREAM_KEY), "{text}");
}

/// Wait (bounded by a count, not a clock assertion) until the server has seen its stream dropped.
async fn wait_aborted(server: &FakeServer) -> usize {
    for _ in 0..500 {
        if server.aborted() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.aborted()
}

#[tokio::test]
async fn an_oversized_whole_answer_is_refused_and_not_read_to_its_end() {
    let server = FakeServer::start(FakeConfig {
        huge_body: Some((200, 64 << 20)),
        ..FakeConfig::default()
    })
    .await;
    let base = upstream_proxy(&server.base_url).await;
    let (status, _, body) =
        post_json(&format!("{base}/v1/chat/completions"), &chat_body(false)).await;
    assert_eq!(status, 502);
    assert!(
        error_message(&body).contains("16 MiB"),
        "{}",
        error_message(&body)
    );
    assert_eq!(
        wait_aborted(&server).await,
        1,
        "the body was read to its end"
    );
    assert_eq!(server.completed(), 0);
}

#[tokio::test]
async fn a_huge_failure_is_relayed_cut_to_its_start() {
    let server = FakeServer::start(FakeConfig {
        huge_body: Some((500, 8 << 20)),
        ..FakeConfig::default()
    })
    .await;
    let base = upstream_proxy(&server.base_url).await;
    let (status, _, body) =
        post_json(&format!("{base}/v1/chat/completions"), &chat_body(false)).await;
    assert_eq!(status, 500);
    assert_eq!(body.len(), 1 << 20);
}

#[tokio::test]
async fn an_upstream_that_is_down_gives_502_in_openais_shape() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let down = format!("http://127.0.0.1:{port}/v1");
    let base = upstream_proxy(&down).await;
    for stream in [false, true] {
        let (status, ct, body) =
            post_json(&format!("{base}/v1/chat/completions"), &chat_body(stream)).await;
        assert_eq!(status, 502);
        assert!(ct.starts_with("application/json"), "{ct}");
        let message = error_message(&body);
        assert!(message.contains("could not be reached"), "{message}");
        // The upstream's address is not told to the client.
        assert!(!message.contains(&port.to_string()), "{message}");
    }
    let list = reqwest::get(format!("{base}/v1/models"))
        .await
        .expect("get");
    assert_eq!(list.status(), 502);
}

/// An upstream whose stream sends `pieces` and then breaks off.
async fn breaking_upstream(pieces: &'static [&'static str]) -> String {
    let (entry, _) = odd_upstream(move |_| {
        let parts = pieces
            .iter()
            .map(|p| Ok(Bytes::from_static(p.as_bytes())))
            .chain([Err(std::io::Error::other("upstream: cut"))]);
        // Paced, so that what comes before the cut is written out before the connection
        // breaks (a body that fails at once loses its unsent bytes with it).
        let paced = futures::stream::iter(parts).then(|p| async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            p
        });
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from_stream(paced))
            .expect("response")
    })
    .await;
    entry
}

#[tokio::test]
async fn a_stream_cut_between_events_ends_in_an_error_event_and_done() {
    let entry = breaking_upstream(&[
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"del",
        "ta\":{\"content\":\"b\"}}]}\n\n",
    ])
    .await;
    let base = upstream_proxy(&entry).await;
    let (status, _, body) =
        post_json(&format!("{base}/v1/chat/completions"), &chat_body(true)).await;
    assert_eq!(status, 200);
    let d = datas(&String::from_utf8_lossy(&body));
    assert_eq!(d.len(), 4, "{d:?}");
    assert_eq!(d[3], "[DONE]");
    let error: Value = serde_json::from_str(&d[2]).expect("json");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("broke off")),
        "{error}"
    );
}

#[tokio::test]
async fn a_stream_cut_mid_event_is_cut_for_the_client_too() {
    let entry = breaking_upstream(&[
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"del",
    ])
    .await;
    let base = upstream_proxy(&entry).await;
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&chat_body(true))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 200);
    // The client's read fails (the connection is cut) rather than ending normally with half
    // an event followed by an error event it would misread.
    let mut response = response;
    let mut got = Vec::new();
    let broke = loop {
        match response.chunk().await {
            Ok(Some(c)) => got.extend_from_slice(&c),
            Ok(None) => break false,
            Err(_) => break true,
        }
    };
    assert!(
        broke,
        "the body ended normally: {}",
        String::from_utf8_lossy(&got)
    );
    assert!(!String::from_utf8_lossy(&got).contains("error"));
}

#[tokio::test]
async fn an_endless_stream_is_ended_at_the_total_time_limit() {
    // An upstream that sends one chunk every 20 ms and never ends.
    let (entry, _) = odd_upstream(|_| {
        let events = futures::stream::unfold(0u64, |n| async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let chunk = format!("data: {{\"n\": {n}}}\n\n");
            Some((Ok::<_, std::io::Error>(Bytes::from(chunk)), n + 1))
        });
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from_stream(events))
            .expect("response")
    })
    .await;
    let limits = UpstreamLimits {
        total: Duration::from_millis(300),
        ..UpstreamLimits::default()
    };
    let up = Upstream::with_limits(&entry, Secret::new(UPSTREAM_KEY), None, limits).expect("up");
    let base = proxy(up).await;
    let (status, _, body) =
        post_json(&format!("{base}/v1/chat/completions"), &chat_body(true)).await;
    assert_eq!(status, 200);
    let d = datas(&String::from_utf8_lossy(&body));
    assert_eq!(d.last().map(String::as_str), Some("[DONE]"));
    let error: Value = serde_json::from_str(&d[d.len() - 2]).expect("json");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("time limit")),
        "{error}"
    );
    // What came before was relayed as it arrived.
    assert!(d.len() > 2, "{d:?}");
}

#[tokio::test]
async fn models_are_relayed_or_the_configured_model_listed() {
    // The upstream's own list.
    let server = FakeServer::start(FakeConfig {
        served_models: Some(vec!["a".into(), "b".into()]),
        ..FakeConfig::default()
    })
    .await;
    let up = Upstream::new(
        &server.base_url,
        Secret::new(UPSTREAM_KEY),
        Some("mine".into()),
    )
    .expect("up");
    let base = proxy(up).await;
    let v: Value = reqwest::get(format!("{base}/v1/models"))
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    let ids: Vec<&str> = v["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert_eq!(ids, ["a", "b"]);

    // No list upstream (404), or no upstream at all: the configured model.
    let (no_list, _) = odd_upstream(|_| {
        Response::builder()
            .status(404)
            .body(Body::from("404 page not found"))
            .expect("response")
    })
    .await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let down = format!("http://{}/v1", listener.local_addr().expect("addr"));
    drop(listener);
    for upstream in [no_list.clone(), down] {
        let up = Upstream::new(&upstream, Secret::default(), Some("mine".into())).expect("up");
        let base = proxy(up).await;
        let r = reqwest::get(format!("{base}/v1/models"))
            .await
            .expect("get");
        assert_eq!(r.status(), 200, "{upstream}");
        let v: Value = r.json().await.expect("json");
        assert_eq!(v["object"], "list");
        assert_eq!(v["data"][0]["id"], "mine");
        assert_eq!(v["data"][0]["object"], "model");
        assert_eq!(v["data"].as_array().map(Vec::len), Some(1));
    }
    // Without a configured model, the upstream's answer as it is.
    let base = upstream_proxy(&no_list).await;
    let r = reqwest::get(format!("{base}/v1/models"))
        .await
        .expect("get");
    assert_eq!(r.status(), 404);
    assert_eq!(r.text().await.expect("text"), "404 page not found");
}

#[tokio::test]
async fn a_base_url_that_is_not_one_is_a_config_error() {
    for bad in ["", "ftp://host/v1", "not a url"] {
        let e = Upstream::new(bad, Secret::default(), None).expect_err(bad);
        assert!(
            matches!(e, tagloop::serve::ServeError::Config(_)),
            "{bad}: {e:?}"
        );
    }
    let e = Upstream::new("http://127.0.0.1:1/v1", Secret::new("bad\nkey"), None).expect_err("key");
    assert!(matches!(e, tagloop::serve::ServeError::Config(_)));
}
