//! The OpenAI-compatible client against a failing fake server, both APIs, streamed and whole:
//! retries and their bounds, `Retry-After`, statuses never retried, timeouts, cut streams and
//! malformed answers — each a clear error, the key never in it.

mod common;

use std::time::{Duration, Instant};

use tagloop::llm::Api;
use tagloop::llm::LlmError;
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::secret::Secret;

use common::fake_server::FakeConfig;
use common::openai::{COMBOS, CUT, TURN, ok, one, turn};

#[tokio::test]
async fn retries_500_then_succeeds() {
    for (api, stream) in COMBOS {
        let mut fake = FakeConfig::turns([TURN]);
        fake.fail_first = 2;
        let (server, r, d) = one(fake, api, stream, |_| {}).await;
        assert_eq!(ok(r, &d, "500").text, CUT);
        assert_eq!(server.request_count(), 3);
    }
}

#[tokio::test]
async fn gives_up_after_bounded_500s() {
    for (api, stream) in COMBOS {
        let mut fake = FakeConfig::turns([TURN]);
        fake.fail_first = 100;
        let (server, r, _) = one(fake, api, stream, |c| c.max_retries = 2).await;
        let e = r.expect_err("must fail");
        assert_eq!(e.status(), Some(500), "{e}");
        assert!(matches!(e, LlmError::GaveUp { attempts: 3, .. }), "{e:?}");
        assert!(e.to_string().contains("model crashed"), "{e}");
        assert_eq!(server.request_count(), 3);
    }
}

#[tokio::test]
async fn honours_retry_after_capped() {
    for (api, stream) in COMBOS {
        let mut fake = FakeConfig::turns([TURN]);
        fake.rate_limit_first = 1;
        fake.retry_after = Some("0.3".into());
        let t = Instant::now();
        let (server, r, d) = one(fake, api, stream, |_| {}).await;
        assert_eq!(ok(r, &d, "429").text, CUT);
        assert!(
            t.elapsed() >= Duration::from_millis(300),
            "Retry-After not honoured: {:?}",
            t.elapsed()
        );
        assert_eq!(server.request_count(), 2);
    }
    // A huge Retry-After is capped.
    let mut fake = FakeConfig::turns([TURN]);
    fake.rate_limit_first = 2;
    fake.retry_after = Some("3600".into());
    let t = Instant::now();
    let (_s, r, _) = one(fake, Api::Chat, true, |c| {
        c.retry_after_cap = Duration::from_millis(20)
    })
    .await;
    r.expect("turn");
    assert!(t.elapsed() < Duration::from_secs(5));
    // A Retry-After no duration can hold is ignored (the backoff applies), on both paths.
    for stream in [true, false] {
        let mut fake = FakeConfig::turns([TURN]);
        fake.rate_limit_first = 1;
        fake.retry_after = Some("1e20".into());
        let (server, r, d) = one(fake, Api::Chat, stream, |_| {}).await;
        assert_eq!(ok(r, &d, "429 1e20").text, CUT);
        assert_eq!(server.request_count(), 2);
    }
    // Exhausted 429s keep the status and say so.
    let mut fake = FakeConfig::turns([TURN]);
    fake.rate_limit_first = 100;
    let (_s, r, _) = one(fake, Api::Completions, false, |c| c.max_retries = 1).await;
    let e = r.expect_err("429");
    assert_eq!(e.status(), Some(429));
    assert!(e.to_string().contains("rate limiting"), "{e}");
}

#[tokio::test]
async fn not_found_model_is_not_retried() {
    for (api, stream) in COMBOS {
        let mut fake = FakeConfig::turns([TURN]);
        fake.known_models = vec!["other".into()];
        let (server, r, _) = one(fake, api, stream, |c| c.model = "llama3".into()).await;
        let e = r.expect_err("404");
        assert_eq!(e.status(), Some(404));
        let msg = e.to_string();
        assert!(
            msg.starts_with("the server answered 404 for model 'llama3': check --model"),
            "{msg}"
        );
        assert!(msg.contains("not found, try pulling it"), "{msg}");
        assert_eq!(server.request_count(), 1);
    }
}

#[tokio::test]
async fn unauthorized_never_prints_the_key() {
    for (api, stream) in COMBOS {
        let mut fake = FakeConfig::turns([TURN]);
        fake.require_key = Some("right-key".into());
        let (server, r, _) = one(fake, api, stream, |c| {
            c.api_key = Secret::new("sk-wrong-key-123")
        })
        .await;
        let e = r.expect_err("401");
        assert_eq!(e.status(), Some(401));
        let msg = e.to_string();
        assert!(msg.contains("check the API key"), "{msg}");
        assert!(
            !msg.contains("sk-wrong") && !format!("{e:?}").contains("sk-wrong"),
            "{msg}"
        );
        assert_eq!(server.request_count(), 1);
        assert_eq!(
            server.requests()[0].authorization.as_deref(),
            Some("Bearer sk-wrong-key-123")
        );
    }
    let mut fake = FakeConfig::turns([TURN]);
    fake.require_key = Some("right-key".into());
    let (_s, r, d) = one(fake, Api::Chat, true, |c| {
        c.api_key = Secret::new("right-key")
    })
    .await;
    ok(r, &d, "good key");
}

#[tokio::test]
async fn connection_refused_is_actionable_and_retried() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let mut cfg = OpenAiConfig::new(format!("http://127.0.0.1:{port}/v1/"), "m");
    cfg.max_retries = 2;
    cfg.retry_min_delay = Duration::from_millis(1);
    let model = OpenAiModel::new(cfg).expect("model");
    let (r, _) = turn(&model, Api::Chat).await;
    let e = r.expect_err("refused");
    assert!(matches!(e, LlmError::GaveUp { attempts: 3, .. }), "{e:?}");
    assert_eq!(e.status(), None);
    assert!(
        e.to_string().starts_with(&format!("cannot connect to http://127.0.0.1:{port}/v1: connection refused — is the server running?")),
        "{e}"
    );
}

#[tokio::test]
async fn slow_first_byte_hits_read_timeout() {
    for (api, stream) in COMBOS {
        let mut fake = FakeConfig::turns([TURN]);
        fake.first_byte_delay = Duration::from_millis(1500);
        let (server, r, _) = one(fake, api, stream, |c| {
            c.read_timeout = Duration::from_millis(200);
            c.max_retries = 1;
        })
        .await;
        let e = r.expect_err("timeout");
        assert!(
            e.to_string().contains("read timeout"),
            "{api:?} {stream}: {e}"
        );
        assert_eq!(
            server.request_count(),
            2,
            "read timeouts are retried once here"
        );
    }
}

#[tokio::test]
async fn slow_server_within_read_timeout_is_fine() {
    let mut fake = FakeConfig::turns([TURN]);
    fake.first_byte_delay = Duration::from_millis(100);
    fake.chunk_delay = Duration::from_millis(1);
    let (_s, r, d) = one(fake, Api::Chat, true, |c| {
        c.read_timeout = Duration::from_millis(500)
    })
    .await;
    assert_eq!(ok(r, &d, "slow").text, CUT);
}

#[tokio::test]
async fn turn_timeout_is_wall_clock() {
    for (api, stream) in COMBOS {
        let mut fake = FakeConfig::turns([TURN]);
        fake.first_byte_delay = Duration::from_secs(3);
        let t = Instant::now();
        let (_s, r, _) = one(fake, api, stream, |c| {
            c.turn_timeout = Some(Duration::from_millis(300))
        })
        .await;
        let e = r.expect_err("turn timeout");
        assert!(matches!(e, LlmError::TurnTimeout { .. }), "{e:?}");
        assert!(e.to_string().contains("turn timeout"));
        assert!(t.elapsed() < Duration::from_secs(2));
    }
}

#[tokio::test]
async fn stream_cut_midway_is_a_clear_error() {
    for api in [Api::Chat, Api::Completions] {
        let mut fake = FakeConfig::turns([TURN]);
        fake.cut_after_events = Some(5);
        let (server, r, d) = one(fake, api, true, |_| {}).await;
        let e = r.expect_err("cut");
        assert!(
            matches!(e, LlmError::StreamCut { received, .. } if received > 0),
            "{api:?}: {e:?}"
        );
        assert!(e.to_string().contains("was cut"), "{e}");
        assert!(!d.is_empty(), "some text arrived before the cut");
        assert_eq!(
            server.request_count(),
            1,
            "text was already passed on: no retry"
        );
    }
}

#[tokio::test]
async fn malformed_json_is_a_clear_error() {
    for (api, stream) in COMBOS {
        let mut fake = FakeConfig::turns([TURN]);
        fake.malformed_json = true;
        let (_s, r, _) = one(fake, api, stream, |_| {}).await;
        let e = r.expect_err("malformed");
        assert!(
            matches!(e, LlmError::Malformed { .. }),
            "{api:?} {stream}: {e:?}"
        );
        assert!(e.to_string().contains("malformed response"), "{e}");
    }
}

#[tokio::test]
async fn empty_choices_is_a_clear_error() {
    for (api, stream) in COMBOS {
        let mut fake = FakeConfig::turns([TURN]);
        fake.empty_choices = true;
        let (_s, r, _) = one(fake, api, stream, |_| {}).await;
        let e = r.expect_err("empty");
        assert!(
            matches!(e, LlmError::EmptyChoices { .. }),
            "{api:?} {stream}: {e:?}"
        );
        assert!(e.to_string().contains("no choices"));
    }
}
