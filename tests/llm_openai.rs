//! The OpenAI-compatible client against the fake server: every switch, both APIs, streamed and whole.

mod common;

use std::time::{Duration, Instant};

use common::fake_server::{FakeConfig, FakeServer, StopMode};
use tagloop::llm::Api;
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::llm::{
    Enforcer, Finish, LlmError, Message, Model, Prompt, Role, TurnRequest, TurnResult,
};
use tagloop::secret::Secret;

const TURN: &str = "<thought>look at é.txt</thought>\n<action>read_file(path=\"é.txt\")</action>\n<observation>invented by the model</observation>\n<final_answer>made up</final_answer>";
const CUT: &str = "<thought>look at é.txt</thought>\n<action>read_file(path=\"é.txt\")";

/// (API, streamed).
const COMBOS: [(Api, bool); 4] = [
    (Api::Chat, true),
    (Api::Chat, false),
    (Api::Completions, true),
    (Api::Completions, false),
];

fn stops() -> Vec<String> {
    vec![
        "</action>".into(),
        "<observation>".into(),
        "</final_answer>".into(),
    ]
}

fn request(api: Api) -> TurnRequest {
    let prompt = match api {
        Api::Chat => Prompt::Chat(vec![
            Message::new(Role::System, "you are an agent"),
            Message::new(Role::User, "<question>read é.txt</question>"),
        ]),
        Api::Completions => Prompt::Text("<question>read é.txt</question>\n".into()),
    };
    TurnRequest {
        prompt,
        stop: stops(),
        max_tokens: Some(512),
        temperature: Some(0.0),
        ..Default::default()
    }
}

fn config(server: &FakeServer, api: Api, stream: bool) -> OpenAiConfig {
    let mut cfg = OpenAiConfig::new(&server.base_url, "fake-model");
    cfg.api = api;
    cfg.stream = stream;
    cfg.retry_min_delay = Duration::from_millis(1);
    cfg.retry_max_delay = Duration::from_millis(5);
    cfg.read_timeout = Duration::from_secs(5);
    cfg.turn_timeout = Some(Duration::from_secs(20));
    cfg
}

/// Run one turn; returns the result and the concatenated deltas.
async fn turn(model: &OpenAiModel, api: Api) -> (Result<TurnResult, LlmError>, String) {
    let req = request(api);
    let mut deltas = String::new();
    let mut sink = |d: &str| deltas.push_str(d);
    let r = model.turn(&req, &mut sink).await;
    (r, deltas)
}

async fn one(
    fake: FakeConfig,
    api: Api,
    stream: bool,
    tweak: impl FnOnce(&mut OpenAiConfig),
) -> (FakeServer, Result<TurnResult, LlmError>, String) {
    let server = FakeServer::start(fake).await;
    let mut cfg = config(&server, api, stream);
    tweak(&mut cfg);
    let model = OpenAiModel::new(cfg).expect("model");
    let (r, d) = turn(&model, api).await;
    (server, r, d)
}

fn ok(r: Result<TurnResult, LlmError>, deltas: &str, label: &str) -> TurnResult {
    let r = r.unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(deltas, r.text, "{label}: deltas must add up to the text");
    assert!(
        !deltas.contains("</act"),
        "{label}: a partial stop leaked: {deltas:?}"
    );
    r
}

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
