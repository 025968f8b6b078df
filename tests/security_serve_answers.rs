//! Security (issue 44, items 1, 3 and 6): what a Messages answer and `count_tokens` can make
//! `tagloop serve` spend, on its one runtime thread and in memory.
//!
//! * **Quadratic answers** (item 1): a whole Messages answer (and a streamed one's transcript
//!   under `--session-dir`) copied the text so far for every upstream delta: 20,000 deltas of
//!   100 bytes froze every other request for 7 s.
//! * **`count_tokens`** (item 3): its body read, schemas compiled and prompt rendered on the
//!   runtime thread, stalling everyone else's requests.
//! * **Streamed answers** (item 6): one event per delta into an unbounded channel, however
//!   slowly the client read.
//!
//! Each attack runs against serve on a one-thread runtime in front of a loopback upstream that
//! streams a scripted answer; `GET /v1/models` is asked meanwhile and must not wait.
#![cfg(feature = "serve")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::response::Response;
use axum::routing::{get, post};
use common::serve::proxy_on_one_thread;
use serde_json::{Map, Value, json};

/// Text of `len` letters that never repeats itself (the client's guard would cut a loop).
fn unrepeating(len: usize) -> String {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect()
}

/// An upstream whose every chat answer streams `deltas` deltas of `size` letters each;
/// `produced` counts the deltas its body has handed to the socket. Its base URL.
async fn streaming_upstream(deltas: usize, size: usize, produced: Arc<AtomicUsize>) -> String {
    let text: Arc<str> = unrepeating(deltas * size).into();
    let chat = move || {
        let (produced, text) = (produced.clone(), text.clone());
        async move {
            // 100 events a chunk, produced only as the socket takes them.
            let chunks = futures::stream::unfold(0usize, move |sent| {
                let (produced, text) = (produced.clone(), text.clone());
                async move {
                    if sent >= deltas {
                        return None;
                    }
                    let n = (deltas - sent).min(100);
                    produced.fetch_add(n, Ordering::SeqCst);
                    let mut chunk = String::new();
                    for i in sent..sent + n {
                        let piece = &text[i * size..(i + 1) * size];
                        let delta = json!({"choices": [{"index": 0, "delta": {"content": piece},
                            "finish_reason": null}]});
                        chunk.push_str(&format!("data: {delta}\n\n"));
                    }
                    if sent + n >= deltas {
                        let end = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 5, "completion_tokens": deltas}});
                        chunk.push_str(&format!("data: {end}\n\ndata: [DONE]\n\n"));
                    }
                    Some((Ok::<_, std::io::Error>(chunk), sent + n))
                }
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(chunks))
                .expect("response")
        }
    };
    let models = || async {
        axum::Json(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}))
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/models", get(models));
    format!("{}/v1", common::serve_on_loopback(app).await)
}

/// Whether `GET /v1/models` was kept waiting by a request that took `total`: longer than 2 s,
/// and longer than a quarter of the whole (on a loaded machine both stretch alike; a stall on
/// the runtime thread is most of the whole).
fn stalled(waited: Duration, total: Duration) -> bool {
    waited > Duration::from_secs(2).max(total / 4)
}

/// Ask `GET /v1/models` every 100 ms until `done` is set: the longest wait.
async fn longest_models_wait(base: String, done: Arc<AtomicUsize>) -> Duration {
    let client = reqwest::Client::new();
    let mut longest = Duration::ZERO;
    while done.load(Ordering::SeqCst) == 0 {
        let asked = Instant::now();
        let r = client
            .get(format!("{base}/models"))
            .send()
            .await
            .expect("models");
        assert_eq!(r.status(), 200);
        longest = longest.max(asked.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    longest
}

/// POST `body` to `path` while `GET /v1/models` is asked over and over: the answer's status and
/// body, and the longest any `GET /v1/models` waited.
async fn post_while_asking(base: &str, path: &str, body: Value) -> ((u16, String), Duration) {
    let done = Arc::new(AtomicUsize::new(0));
    let asking = tokio::spawn(longest_models_wait(base.to_owned(), done.clone()));
    let r = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(&body)
        .send()
        .await
        .expect("send");
    let status = r.status().as_u16();
    let text = r.text().await.expect("body");
    done.store(1, Ordering::SeqCst);
    ((status, text), asking.await.expect("asking"))
}

fn chat(stream: bool) -> Value {
    json!({"model": "m", "max_tokens": 1_000_000, "stream": stream,
           "messages": [{"role": "user", "content": "Write at length."}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_messages_answer_is_built_in_linear_time_and_stalls_no_one() {
    let upstream = streaming_upstream(20_000, 100, Arc::default()).await;
    let dir = tempfile::tempdir().expect("dir");
    let sessions = dir.path().to_path_buf();
    let base = proxy_on_one_thread(&upstream, |c| {
        c.model = Some("m".into());
        c.session_dir = Some(sessions);
    });
    // Whole, then streamed (its transcript is the whole message, built when it ends).
    for stream in [false, true] {
        let started = Instant::now();
        let ((status, text), waited) = post_while_asking(&base, "/messages", chat(stream)).await;
        assert_eq!(status, 200, "{}", &text[..text.len().min(300)]);
        // Generous (the target is 100 ms of CPU): quadratic, this took 7.6 s.
        assert!(
            !stalled(waited, started.elapsed()),
            "stream {stream}: GET /v1/models waited {waited:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "stream {stream}: {:?}",
            started.elapsed()
        );
        if !stream {
            let v: Value = serde_json::from_str(&text).expect("json");
            assert_eq!(
                v["content"][0]["text"].as_str().map(str::len),
                Some(2_000_000)
            );
        }
    }
    // The streamed answer's transcript is written when its stream ends, a moment after the
    // client has read the last event: wait for it (bounded).
    let mut kept: Vec<_> = Vec::new();
    for _ in 0..200 {
        kept = std::fs::read_dir(dir.path())
            .expect("dir")
            .flatten()
            .collect();
        if kept.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(kept.len(), 2);
    for file in kept {
        let v: Value =
            serde_json::from_slice(&std::fs::read(file.path()).expect("read")).expect("json");
        let text = v.pointer("/answer/content/0/text").and_then(Value::as_str);
        assert_eq!(
            text.map(str::len),
            Some(2_000_000),
            "{}",
            file.path().display()
        );
    }
}

/// Anthropic tools: `count` tools of `props` string properties each.
fn anthropic_tools(count: usize, props: usize) -> Value {
    let props: Map<String, Value> = (0..props)
        .map(|i| (format!("p{i}"), json!({"type": "string"})))
        .collect();
    (0..count)
        .map(|t| json!({"name": format!("t{t}"), "input_schema": {"type": "object", "properties": props}}))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_tokens_compiles_off_the_runtime_thread() {
    let upstream = streaming_upstream(1, 1, Arc::default()).await;
    let base = proxy_on_one_thread(&upstream, |c| {
        c.model = Some("m".into());
        c.concurrency = 8;
    });
    // Three requests just under the subschema cap: seconds of compiling each.
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                      "tools": anthropic_tools(128, 150)});
    let started = Instant::now();
    let counts: Vec<_> = (0..3)
        .map(|_| {
            let (base, body) = (base.clone(), body.clone());
            tokio::spawn(async move {
                let r = reqwest::Client::new()
                    .post(format!("{base}/messages/count_tokens"))
                    .json(&body)
                    .send()
                    .await
                    .expect("send");
                (r.status().as_u16(), r.text().await.unwrap_or_default())
            })
        })
        .collect();
    let done = Arc::new(AtomicUsize::new(0));
    let asking = tokio::spawn(longest_models_wait(base.clone(), done.clone()));
    for count in counts {
        let (status, text) = count.await.expect("count");
        assert_eq!(status, 200, "{text}");
        let v: Value = serde_json::from_str(&text).expect("json");
        assert!(v["input_tokens"].as_u64().is_some_and(|n| n > 1000), "{v}");
    }
    done.store(1, Ordering::SeqCst);
    let waited = asking.await.expect("asking");
    // On the runtime thread, three such requests made it wait for most of their time.
    assert!(
        !stalled(waited, started.elapsed()),
        "GET /v1/models waited {waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_nothing_holds_back_the_upstream() {
    // 600,000 one-byte deltas (42 MB of events); the client takes the headers and reads no
    // more. The four sockets' buffers between them hold up to some 20 MB.
    let total = 600_000;
    let produced = Arc::new(AtomicUsize::new(0));
    let upstream = streaming_upstream(total, 1, produced.clone()).await;
    let base = proxy_on_one_thread(&upstream, |c| c.model = Some("m".into()));
    let response = reqwest::Client::new()
        .post(format!("{base}/messages"))
        .json(&chat(true))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 200);
    // Wait until the upstream has made no progress for 4 s (or has sent all: the unbounded
    // channel took every delta), at most 60 s.
    let started = Instant::now();
    let (mut last, mut still) = (0, 0);
    while still < 8 && last < total && started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = produced.load(Ordering::SeqCst);
        still = if now == last { still + 1 } else { 0 };
        last = now;
    }
    let now = produced.load(Ordering::SeqCst);
    // Backpressure: what is in flight is the sockets' buffers and a few events, not the answer.
    eprintln!("in flight while the client reads nothing: {now} of {total} deltas");
    assert!(
        still >= 8,
        "the upstream never stopped: {now} of {total} deltas sent"
    );
    assert!(
        now < total / 2,
        "the upstream sent {now} of {total} deltas to a client reading nothing"
    );
    // The client goes away: the answer's task ends and drops the upstream's stream.
    drop(response);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = produced.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(produced.load(Ordering::SeqCst), after);
    assert!(after < total, "{after}");
}
