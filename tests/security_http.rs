//! Security (issue 21, items 1, 4 and 5): what a hostile or broken model server can make the
//! HTTP client do.
//!
//! * **Redirects** (item 1): a base URL that answers `307` to another origin must never get the
//!   key (or any request at all) sent there, on the server probe, a whole answer or a streamed
//!   turn; the user is told where the server points instead.
//! * **One turn's size** (item 4): a server that streams text without end (or ignores the token
//!   limit) gets its stream dropped at a byte cap derived from the turn's budget, and the turn
//!   ends as `length`; reasoning counts too.
//! * **Bodies** (item 5): the probe's `/props`, error bodies and whole answers are read up to a
//!   cap, never to their end.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use common::fake_server::{FakeConfig, FakeServer, StopMode};
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::llm::{Finish, LlmError, Message, Model, Prompt, Role, ServerKind, TurnRequest};
use tagloop::secret::Secret;

const KEY: &str = "sk-redirect-test-0123456789";

/// (path, `Authorization`) of every request a recording server got.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A server that records every request and answers each with `307` to `target` + the path
/// (`None`: to itself, under `/again`, so a client that follows keeps coming back).
async fn redirector(target: Option<String>) -> (String, Seen) {
    #[derive(Clone)]
    struct S {
        seen: Seen,
        target: String,
    }
    async fn any(State(s): State<S>, uri: Uri, headers: HeaderMap) -> Response {
        let auth = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Ok(mut seen) = s.seen.lock() {
            seen.push((uri.path().to_owned(), auth));
        }
        let to = format!("{}{}", s.target, uri.path());
        (StatusCode::TEMPORARY_REDIRECT, [("location", to)], "").into_response()
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen: Seen = Arc::default();
    let state = S {
        seen: seen.clone(),
        target: target.unwrap_or_else(|| format!("http://{addr}/again")),
    };
    let app = Router::new().fallback(any).with_state(state);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}"), seen)
}

fn request() -> TurnRequest {
    TurnRequest {
        prompt: Prompt::Chat(vec![Message::new(Role::User, "hi")]),
        stop: vec!["</action>".into()],
        max_tokens: Some(100),
        ..Default::default()
    }
}

fn config(base_url: &str, stream: bool) -> OpenAiConfig {
    let mut cfg = OpenAiConfig::new(base_url, "m");
    cfg.api_key = Secret::new(KEY);
    cfg.stream = stream;
    cfg.retry_min_delay = Duration::from_millis(1);
    cfg.retry_max_delay = Duration::from_millis(5);
    cfg
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
async fn a_redirect_to_another_host_never_gets_a_request_or_the_key() {
    for stream in [false, true] {
        let (other, seen_other) = redirector(None).await;
        let (entry, seen_entry) = redirector(Some(other.clone())).await;
        let model = OpenAiModel::new(config(&format!("{entry}/v1"), stream)).expect("model");
        let e = model
            .turn(&request(), &mut |_| {})
            .await
            .expect_err("a redirect is an error");
        let msg = e.to_string();
        assert_eq!(e.status(), Some(307), "stream={stream}: {e:?}");
        assert!(
            msg.contains(&format!("redirects to {other}/v1/chat/completions")),
            "stream={stream}: the error says where the server points: {msg}"
        );
        assert!(msg.contains("--base-url"), "stream={stream}: {msg}");
        assert!(!msg.contains(KEY), "{msg}");
        let seen = seen_other.lock().expect("lock").clone();
        assert!(
            seen.iter().all(|(_, auth)| auth.is_none()),
            "stream={stream}: the key reached the other host: {seen:?}"
        );
        assert!(
            seen.is_empty(),
            "stream={stream}: the redirect was followed: {seen:?}"
        );
        assert_eq!(
            seen_entry.lock().expect("lock").len(),
            1,
            "stream={stream}: a redirect is not retried"
        );
    }
}

#[tokio::test]
async fn the_server_probe_follows_no_redirect() {
    let (other, seen_other) = redirector(None).await;
    let (entry, seen_entry) = redirector(Some(other)).await;
    let model = OpenAiModel::new(config(&format!("{entry}/v1"), true)).expect("model");
    assert_eq!(model.server_kind().await, ServerKind::Other);
    let seen = seen_other.lock().expect("lock").clone();
    assert!(
        seen.iter().all(|(_, auth)| auth.is_none()),
        "the key reached the other host: {seen:?}"
    );
    assert!(seen.is_empty(), "a probe followed the redirect: {seen:?}");
    // Both probes were asked at the entry: `/props` and `/v1/models`.
    assert_eq!(seen_entry.lock().expect("lock").len(), 2);
}

/// Letters with no repeating pattern (the degeneration guard would cut `"x".repeat(n)`).
fn aperiodic(len: usize) -> String {
    let mut x: u64 = 3;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            char::from(b'a' + ((x >> 33) % 26) as u8)
        })
        .collect()
}

fn runaway(turn: String) -> FakeConfig {
    let mut fake = FakeConfig::turns([turn]);
    fake.ignore_max_tokens = true;
    fake.stop_mode = StopMode::Ignore;
    fake.token_chars = 1024;
    fake.chunk_bytes = 4096;
    fake.chunk_delay = Duration::from_millis(1);
    fake
}

#[tokio::test]
async fn a_turn_past_its_token_budget_is_cut_at_the_byte_cap() {
    for stream in [true, false] {
        let server = FakeServer::start(runaway(aperiodic(400_000))).await;
        let model = OpenAiModel::new(config(&server.base_url, stream)).expect("model");
        let mut deltas = String::new();
        let r = model
            .turn(&request(), &mut |d: &str| deltas.push_str(d))
            .await
            .expect("turn");
        // 100 tokens: at most 16 bytes each are kept.
        assert!(r.text.len() <= 1600, "stream={stream}: {}", r.text.len());
        assert!(r.text.len() >= 1500, "stream={stream}: {}", r.text.len());
        assert_eq!(r.finish, Finish::Length, "stream={stream}");
        assert_eq!(deltas, r.text, "stream={stream}");
        if stream {
            assert_eq!(wait_aborted(&server).await, 1, "the stream was dropped");
            assert_eq!(server.completed(), 0);
        }
    }
}

#[tokio::test]
async fn reasoning_counts_toward_the_cap() {
    for stream in [true, false] {
        let mut fake = runaway("short answer".into());
        fake.reasoning = Some(aperiodic(400_000));
        let server = FakeServer::start(fake).await;
        let model = OpenAiModel::new(config(&server.base_url, stream)).expect("model");
        let r = model.turn(&request(), &mut |_| {}).await.expect("turn");
        let kept = r.text.len() + r.reasoning.as_deref().map_or(0, str::len);
        assert!(kept <= 1600, "stream={stream}: {kept}");
        assert_eq!(r.finish, Finish::Length, "stream={stream}");
    }
}

#[tokio::test]
async fn a_turn_without_a_budget_is_cut_at_the_fixed_ceiling() {
    let mut fake = runaway(aperiodic(5 << 20));
    fake.token_chars = 16 * 1024;
    fake.chunk_bytes = 64 * 1024;
    fake.chunk_delay = Duration::ZERO;
    let server = FakeServer::start(fake).await;
    let model = OpenAiModel::new(config(&server.base_url, true)).expect("model");
    let mut req = request();
    req.max_tokens = None;
    let r = model.turn(&req, &mut |_| {}).await.expect("turn");
    assert!(r.text.len() <= 4 << 20, "{}", r.text.len());
    assert_eq!(r.finish, Finish::Length);
}

#[tokio::test]
async fn an_oversized_props_answer_is_not_taken() {
    let fake = FakeConfig {
        props: true,
        props_padding: 2 << 20,
        ..FakeConfig::default()
    };
    let server = FakeServer::start(fake).await;
    let model = OpenAiModel::new(config(&server.base_url, true)).expect("model");
    // Over 1 MiB: refused, so the server is not taken for llama.cpp (`/v1/models` decides).
    assert_eq!(model.server_kind().await, ServerKind::Other);
    // The same answer under the cap is read.
    let fake = FakeConfig {
        props: true,
        props_padding: 512 << 10,
        ..FakeConfig::default()
    };
    let server = FakeServer::start(fake).await;
    let model = OpenAiModel::new(config(&server.base_url, true)).expect("model");
    assert_eq!(model.server_kind().await, ServerKind::LlamaCpp);
}

#[tokio::test]
async fn an_oversized_error_body_is_not_read_to_its_end() {
    for stream in [true, false] {
        let fake = FakeConfig {
            huge_body: Some((500, 64 << 20)),
            ..FakeConfig::default()
        };
        let server = FakeServer::start(fake).await;
        let mut cfg = config(&server.base_url, stream);
        cfg.max_retries = 0;
        let model = OpenAiModel::new(cfg).expect("model");
        let e = model.turn(&request(), &mut |_| {}).await.expect_err("500");
        assert_eq!(e.status(), Some(500), "stream={stream}: {e:?}");
        assert_eq!(
            wait_aborted(&server).await,
            1,
            "stream={stream}: the body was read to its end"
        );
        assert_eq!(server.completed(), 0, "stream={stream}");
    }
}

#[tokio::test]
async fn an_oversized_answer_is_not_read_to_its_end() {
    for stream in [true, false] {
        let fake = FakeConfig {
            huge_body: Some((200, 64 << 20)),
            ..FakeConfig::default()
        };
        let server = FakeServer::start(fake).await;
        let mut cfg = config(&server.base_url, stream);
        cfg.max_retries = 0;
        let model = OpenAiModel::new(cfg).expect("model");
        let e = model.turn(&request(), &mut |_| {}).await.expect_err("huge");
        assert!(
            matches!(e, LlmError::Malformed { .. }),
            "stream={stream}: {e:?}"
        );
        assert!(e.to_string().contains("MiB"), "stream={stream}: {e}");
        assert_eq!(
            wait_aborted(&server).await,
            1,
            "stream={stream}: the body was read to its end"
        );
        assert_eq!(server.completed(), 0, "stream={stream}");
    }
}
