//! The OpenAI-compatible client against the fake server: every switch, both APIs, streamed and
//! whole — stops however the server treats them, limits, usage and reasoning, the request's
//! fields, the degeneration guard, SSE framing. Failing servers are in llm_failures.rs.

mod common;

use std::time::Duration;

use tagloop::llm::Api;
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::llm::{Enforcer, Finish, Message, Model, Prompt, Role, TurnRequest};
use tagloop::secret::Secret;

use common::fake_server::{FakeConfig, FakeServer, StopMode};
use common::openai::{COMBOS, CUT, TURN, config, ok, one, request, stops, turn};

async fn check_cut(mode: StopMode, want: Enforcer, tweak: fn(&mut FakeConfig)) {
    for (api, stream) in COMBOS {
        let label = format!("{mode:?} {api:?} stream={stream}");
        let mut fake = FakeConfig::turns([TURN]);
        fake.stop_mode = mode;
        tweak(&mut fake);
        let (server, r, d) = one(fake, api, stream, |_| {}).await;
        let r = ok(r, &d, &label);
        assert_eq!(r.text, CUT, "{label}");
        assert_eq!(r.finish, Finish::Stop("</action>".into()), "{label}");
        assert_eq!(r.enforced_by, Some(want), "{label}");
        let reqs = server.requests();
        assert_eq!(reqs.len(), 1, "{label}");
        assert_eq!(reqs[0].stops(), stops(), "{label}");
        assert_eq!(reqs[0].stream(), stream, "{label}");
        assert_eq!(reqs[0].body["max_tokens"], 512, "{label}");
        let want_path = if api == Api::Chat {
            "/v1/chat/completions"
        } else {
            "/v1/completions"
        };
        assert_eq!(reqs[0].path, want_path, "{label}");
    }
}

#[tokio::test]
async fn server_strips_stop() {
    check_cut(StopMode::Strip, Enforcer::Server, |_| {}).await;
}

#[tokio::test]
async fn server_strips_stop_and_names_it() {
    // No open tag to infer from: only vLLM's `stop_reason` says which stop fired.
    for (api, stream) in COMBOS {
        let mut fake = FakeConfig::turns(["<thought>hm</thought>\n<observation>made up"]);
        fake.stop_reason = true;
        let (_s, r, d) = one(fake, api, stream, |_| {}).await;
        let r = ok(r, &d, "stop_reason");
        assert_eq!(r.text, "<thought>hm</thought>\n");
        assert_eq!(r.finish, Finish::Stop("<observation>".into()));
        assert_eq!(r.enforced_by, Some(Enforcer::Server));
        // Without it, the turn just ends.
        let fake = FakeConfig::turns(["<thought>hm</thought>\n<observation>made up"]);
        let (_s, r, d) = one(fake, api, stream, |_| {}).await;
        assert_eq!(ok(r, &d, "no stop_reason").finish, Finish::End);
    }
}

#[tokio::test]
async fn server_keeps_stop() {
    check_cut(StopMode::Keep, Enforcer::Client, |_| {}).await;
}

#[tokio::test]
async fn server_ignores_stop() {
    check_cut(StopMode::Ignore, Enforcer::Client, |_| {}).await;
}

#[tokio::test]
async fn server_flushes_partial_stop() {
    check_cut(StopMode::FlushPartial, Enforcer::Server, |_| {}).await;
}

#[tokio::test]
async fn empty_finish_reason_and_missing_ids() {
    check_cut(StopMode::Strip, Enforcer::Server, |f| {
        f.empty_finish_reason = true;
        f.missing_ids = true;
    })
    .await;
    check_cut(StopMode::Ignore, Enforcer::Client, |f| {
        f.empty_finish_reason = true
    })
    .await;
}

#[tokio::test]
async fn server_rejects_stop_then_asked_without_it_for_good() {
    for (api, stream) in COMBOS {
        let label = format!("{api:?} stream={stream}");
        let mut fake = FakeConfig::turns([TURN, TURN]);
        fake.stop_mode = StopMode::Reject;
        let server = FakeServer::start(fake).await;
        let model = OpenAiModel::new(config(&server, api, stream)).expect("model");
        let (r, d) = turn(&model, api).await;
        let r = ok(r, &d, &label);
        assert_eq!(r.text, CUT, "{label}");
        assert_eq!(r.enforced_by, Some(Enforcer::Client), "{label}");
        assert!(model.stop_rejected(), "{label}");
        let reqs = server.requests();
        assert_eq!(reqs.len(), 2, "{label}");
        assert_eq!(reqs[0].stops().len(), 3, "{label}");
        assert!(reqs[1].stops().is_empty(), "{label}");
        // The next turn does not try stops again.
        let (r, d) = turn(&model, api).await;
        assert_eq!(ok(r, &d, &label).text, CUT);
        assert_eq!(server.request_count(), 3, "{label}");
        assert!(server.requests()[2].stops().is_empty(), "{label}");
    }
}

#[tokio::test]
async fn no_stop_in_text_ends_the_turn() {
    for (api, stream) in COMBOS {
        let fake = FakeConfig::turns(["just text, ✓ done"]);
        let (_s, r, d) = one(fake, api, stream, |_| {}).await;
        let r = ok(r, &d, "end");
        assert_eq!(r.text, "just text, ✓ done");
        assert_eq!(r.finish, Finish::End);
        assert_eq!(r.enforced_by, None);
    }
}

/// Letters with no repeating pattern (the degeneration guard would cut `"x".repeat(n)`).
fn aperiodic(len: usize) -> String {
    let mut x: u64 = 1;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            char::from(b'a' + ((x >> 33) % 26) as u8)
        })
        .collect()
}

#[tokio::test]
async fn token_limit_is_length() {
    for (api, stream) in COMBOS {
        let fake = FakeConfig::turns([aperiodic(3000)]);
        let (server, r, d) = one(fake, api, stream, |c| {
            c.token_field = "max_completion_tokens".into()
        })
        .await;
        let r = ok(r, &d, "length");
        assert_eq!(r.finish, Finish::Length);
        assert_eq!(r.text.len(), 512 * 4);
        assert_eq!(server.requests()[0].body["max_completion_tokens"], 512);
        assert!(server.requests()[0].body.get("max_tokens").is_none());
    }
    let fake = FakeConfig::turns(["y".repeat(100)]);
    let server = FakeServer::start(fake).await;
    let model = OpenAiModel::new(config(&server, Api::Chat, true)).expect("model");
    let mut req = request(Api::Chat);
    req.max_tokens = Some(5);
    let r = model.turn(&req, &mut |_| {}).await.expect("turn");
    assert_eq!(r.finish, Finish::Length);
    assert_eq!(r.text.len(), 20);
}

#[tokio::test]
async fn usage_and_reasoning_are_reported() {
    for (api, stream) in COMBOS {
        let label = format!("{api:?} stream={stream}");
        let mut fake = FakeConfig::turns([TURN]);
        fake.reasoning = Some("let me think… carefully".into());
        let (server, r, d) = one(fake, api, stream, |_| {}).await;
        let r = ok(r, &d, &label);
        assert!(
            r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0,
            "{label}: {:?}",
            r.usage
        );
        if api == Api::Chat {
            assert_eq!(
                r.reasoning.as_deref(),
                Some("let me think… carefully"),
                "{label}"
            );
        }
        if stream {
            assert_eq!(
                server.requests()[0].body["stream_options"]["include_usage"],
                true,
                "{label}"
            );
            assert!(r.first_token.is_some(), "{label}");
        }
    }
    // Switched off for proxies that reject it.
    let (server, r, _) = one(FakeConfig::turns(["a"]), Api::Chat, true, |c| {
        c.include_usage = false
    })
    .await;
    r.expect("turn");
    assert!(server.requests()[0].body.get("stream_options").is_none());
}

#[tokio::test]
async fn client_stop_drops_the_stream() {
    let long_tail = format!("{TURN}{}", " and the model keeps going".repeat(200));
    let mut fake = FakeConfig::turns([long_tail]);
    fake.stop_mode = StopMode::Ignore;
    fake.chunk_delay = Duration::from_millis(2);
    let (server, r, d) = one(fake, Api::Chat, true, |_| {}).await;
    assert_eq!(ok(r, &d, "cancel").text, CUT);
    for _ in 0..100 {
        if server.aborted() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        server.aborted(),
        1,
        "the server should see the client hang up"
    );
    assert_eq!(server.completed(), 0);
}

#[tokio::test]
async fn more_than_four_stops_are_enforced_but_four_sent() {
    let server = FakeServer::start(FakeConfig::turns(["alpha beta STOP5 gamma"])).await;
    let model = OpenAiModel::new(config(&server, Api::Chat, true)).expect("model");
    let mut req = request(Api::Chat);
    req.stop = vec![
        "S1".into(),
        "S2".into(),
        "S3".into(),
        "S4".into(),
        "STOP5".into(),
    ];
    let r = model.turn(&req, &mut |_| {}).await.expect("turn");
    assert_eq!(server.requests()[0].stops().len(), 4);
    assert_eq!(r.text, "alpha beta ");
    assert_eq!(r.finish, Finish::Stop("STOP5".into()));
    assert_eq!(r.enforced_by, Some(Enforcer::Client));
}

#[tokio::test]
async fn chat_prefill_sends_the_assistant_message_as_is() {
    let server = FakeServer::start(FakeConfig::turns(["continued\")</action>"])).await;
    let mut cfg = config(&server, Api::Chat, true);
    cfg.prefill = true;
    let model = OpenAiModel::new(cfg).expect("model");
    assert!(model.supports_prefill());
    let req = TurnRequest {
        prompt: Prompt::Chat(vec![
            Message::new(Role::User, "q"),
            Message::new(Role::Assistant, "<action>write(text=\"a </action> b"),
        ]),
        stop: stops(),
        ..Default::default()
    };
    let r = model.turn(&req, &mut |_| {}).await.expect("turn");
    assert_eq!(r.text, "continued\")");
    let body = &server.requests()[0].body;
    assert_eq!(body["messages"][1]["role"], "assistant");
    assert_eq!(
        body["messages"][1]["content"],
        "<action>write(text=\"a </action> b"
    );
}

#[tokio::test]
async fn extra_fields_and_headers_are_sent() {
    let server = FakeServer::start(FakeConfig::turns(["a"])).await;
    let mut cfg = config(&server, Api::Completions, false);
    cfg.extra
        .insert("cache_prompt".into(), serde_json::json!(true));
    cfg.extra.insert("top_k".into(), serde_json::json!(1));
    let model = OpenAiModel::new(cfg).expect("model");
    let mut req = request(Api::Completions);
    req.seed = Some(7);
    req.extra.insert("top_k".into(), serde_json::json!(40));
    model.turn(&req, &mut |_| {}).await.expect("turn");
    let body = &server.requests()[0].body;
    assert_eq!(body["cache_prompt"], true);
    assert_eq!(body["top_k"], 40, "the request's extra wins");
    assert_eq!(body["seed"], 7);
    assert_eq!(body["prompt"], "<question>read é.txt</question>\n");
    assert_eq!(body["model"], "fake-model");
}

#[tokio::test]
async fn wrong_prompt_kind_is_a_config_error() {
    let server = FakeServer::start(FakeConfig::default()).await;
    let model = OpenAiModel::new(config(&server, Api::Chat, true)).expect("model");
    let e = model
        .turn(&request(Api::Completions), &mut |_| {})
        .await
        .expect_err("kind");
    assert!(e.to_string().contains("--api completions"), "{e}");
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn a_repeating_turn_is_cut_by_the_degeneration_guard() {
    for (api, stream) in COMBOS {
        let label = format!("{api:?} stream={stream}");
        let looping = format!("<thought>{}", "I will read it. ".repeat(100));
        let mut fake = FakeConfig::turns([looping.clone(), looping]);
        fake.chunk_bytes = 4096;
        fake.chunk_delay = Duration::from_millis(5);
        let server = FakeServer::start(fake).await;
        let model = OpenAiModel::new(config(&server, api, stream)).expect("model");
        let mut deltas = String::new();
        let r = model
            .turn(&request(api), &mut |d: &str| deltas.push_str(d))
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(r.finish, Finish::Repeated, "{label}");
        // The turn keeps the text up to the first repetition: the thought said once.
        assert!(r.text.starts_with("<thought>I will read it. "), "{label}");
        assert!(r.text.len() < 100, "{label}: {}", r.text);
        // What was already shown is a superset of what is kept.
        assert!(deltas.starts_with(&r.text), "{label}");
        // The server sent no count for a dropped stream: an estimate, not zero.
        assert!(r.usage.completion_tokens > 0, "{label}");
        if stream {
            // The request was dropped at once: the server did not finish writing it.
            for _ in 0..100 {
                if server.aborted() == 1 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(server.aborted(), 1, "{label}");
            assert_eq!(server.completed(), 0, "{label}");
        }

        let mut req = request(api);
        req.keep_repetitions = true;
        req.max_tokens = Some(160);
        let r = model.turn(&req, &mut |_| {}).await.expect("turn");
        assert_ne!(
            r.finish,
            Finish::Repeated,
            "{label}: the guard was turned off"
        );
        // It ran on to the token limit (160 tokens of 4 bytes on the fake server), past the
        // point where the guard fires.
        assert_eq!(r.finish, Finish::Length, "{label}");
        assert_eq!(r.text.len(), 640, "{label}");
    }
}

/// The server-sent events as servers really frame them: LF, CRLF or CR line ends (split between
/// reads), comments, a `keepalive` event, an event whose JSON spans two `data:` lines, a
/// character split between reads, and a last event the body's end closes.
#[tokio::test]
async fn every_sse_framing_reads_the_same() {
    use axum::body::{Body, Bytes};
    let pieces: Vec<&'static [u8]> = vec![
        b": a comment\r\nevent: keepalive\r\ndata: {}\r\n\r",
        b"\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\xc3",
        b"\xa9\"}}]}\r\r",
        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"},\r\ndata: \"finish_reason\":null}]}\n\n",
        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"c\"},\"finish_reason\":\"stop\"}]}",
    ];
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || {
            let pieces = pieces.clone();
            async move {
                let stream = async_stream::stream! {
                    for p in pieces {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        yield Ok::<_, std::io::Error>(Bytes::from_static(p));
                    }
                };
                axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from_stream(stream))
                    .unwrap_or_default()
            }
        }),
    );
    let base = common::serve_on_loopback(app).await;
    let mut cfg = OpenAiConfig::new(format!("{base}/v1"), "m");
    cfg.server = Some(tagloop::llm::ServerKind::Other);
    let model = OpenAiModel::new(cfg).expect("model");
    let (r, d) = turn(&model, Api::Chat).await;
    let r = ok(r, &d, "framing");
    assert_eq!(r.text, "aébc");
    assert_eq!(r.finish, Finish::End);
}

// The client's settings: a pasted URL is normalised, the key is never printed.

#[test]
fn base_url_is_normalised() {
    assert_eq!(
        tagloop::llm::openai::normalize_base_url(" http://h:1/v1/ ").unwrap(),
        "http://h:1/v1"
    );
    assert_eq!(
        tagloop::llm::openai::normalize_base_url("http://h/v1/chat/completions").unwrap(),
        "http://h/v1"
    );
    assert!(tagloop::llm::openai::normalize_base_url("localhost:11434").is_err());
    assert!(tagloop::llm::openai::normalize_base_url("ftp://x").is_err());
}

#[test]
fn secret_is_never_printed() {
    let mut cfg = OpenAiConfig::new("http://h/v1", "m");
    cfg.api_key = Secret::new("sk-very-secret");
    let dbg = format!("{cfg:?}");
    assert!(!dbg.contains("sk-very-secret"), "{dbg}");
    let model = OpenAiModel::new(cfg).unwrap();
    assert!(!format!("{model:?}").contains("sk-very"));
    assert!(!tagloop::llm::Model::describe(&model).contains("sk-very"));
}
