//! The serve proxy's pass-through reads an upstream's whole answer up to a cap (the model
//! client's capped reader): an answer over it is refused with 502 in OpenAI's error shape, a
//! failure over it is relayed cut to its start.
#![cfg(feature = "serve")]

mod common;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use common::fake_server::{FakeConfig, FakeServer};
use serde_json::{Value, json};
use tagloop::secret::Secret;
use tagloop::serve::testing::{Upstream, UpstreamLimits};

/// The pass-through in front of a fake upstream that answers with `status` and `bytes` bytes of
/// streamed body, read with a 64 KiB cap for both answers and failures: status and body.
async fn relay_huge(status: u16, bytes: usize) -> (u16, Vec<u8>) {
    let server = FakeServer::start(FakeConfig {
        huge_body: Some((status, bytes)),
        ..FakeConfig::default()
    })
    .await;
    let limits = UpstreamLimits {
        max_answer: 64 << 10,
        max_error: 64 << 10,
        ..UpstreamLimits::default()
    };
    let up = Arc::new(
        Upstream::with_limits(&server.base_url, Secret::new("sk-up"), None, limits).expect("up"),
    );
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move |body: Bytes| async move { up.pass_through(body).await }),
    );
    let base = common::serve_on_loopback(app).await;
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .expect("send");
    let status = response.status().as_u16();
    (status, response.bytes().await.expect("body").to_vec())
}

#[tokio::test]
async fn an_answer_over_the_cap_is_refused_and_names_the_cap() {
    let (status, body) = relay_huge(200, 1 << 20).await;
    assert_eq!(status, 502);
    let v: Value = serde_json::from_slice(&body).expect("an OpenAI error object");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("larger than 64 KiB"), "{v}");
}

#[tokio::test]
async fn answers_at_the_cap_pass_and_failures_over_it_keep_their_start() {
    let (status, body) = relay_huge(200, 64 << 10).await;
    assert_eq!((status, body.len()), (200, 64 << 10));
    let (status, body) = relay_huge(500, 1 << 20).await;
    assert_eq!((status, body.len()), (500, 64 << 10));
}
