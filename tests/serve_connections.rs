//! `tagloop serve` keeps its connections to the upstream (issue 48): requests answered one after
//! another, whole and streamed, with tools (serve's own turns and its guess) and without (the
//! pass-through), go over the connections of its two upstream clients, never one per request.
//! The fake upstream counts the TCP connections it accepts, speaks HTTP/1.1 keep-alive and ends
//! each streamed body a moment after `[DONE]`.

#![cfg(feature = "serve")]

mod common;

use std::time::Duration;

use common::fake_server::{FakeConfig, FakeServer};
use common::serve::{ask, post, proxy};
use serde_json::json;

/// Requests answered at once by the proxy under test.
const CONCURRENCY: usize = 4;

#[tokio::test]
async fn sequential_requests_open_at_most_the_proxys_concurrency() {
    let mut cfg = FakeConfig::turns(Vec::<String>::new());
    cfg.default_reply =
        "<thought>I need the weather.</thought>\n<action>weather(city=\"Paris\")</action>".into();
    cfg.done_delay = Duration::from_millis(40);
    let fake = FakeServer::start(cfg).await;
    let base = proxy(&fake, |c| c.concurrency = CONCURRENCY).await;
    let client = reqwest::Client::new();
    for i in 0..12 {
        let stream = i % 2 == 1;
        let mut body = ask(json!({"stream": stream}));
        if i % 4 >= 2 {
            // No tools: passed through to the upstream as it is.
            body.as_object_mut().map(|b| b.remove("tools"));
        }
        if stream {
            let answer = client
                .post(format!("{base}/chat/completions"))
                .json(&body)
                .send()
                .await
                .expect("send");
            assert_eq!(answer.status(), 200);
            let text = answer.text().await.expect("text");
            assert!(text.contains("[DONE]"), "{text}");
        } else {
            let (status, v) = post(&base, &body).await;
            assert_eq!(status, 200, "{v}");
        }
    }
    let opened = fake.connections();
    // Kept: a client per upstream use (the turns and guesses of each API, the pass-through).
    assert!(
        (1..=CONCURRENCY).contains(&opened),
        "{opened} connections for 12 requests"
    );
    assert_eq!(fake.aborted(), 0, "no finished stream dropped");
}
