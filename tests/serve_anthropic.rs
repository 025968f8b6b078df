//! `tagloop serve`'s Anthropic face (`POST /v1/messages`, `/v1/messages/count_tokens`) against
//! the fake upstream: every block type, each `tool_choice`, the streamed event sequence, a
//! corrected turn that never reaches the client, a request without tools on the chat API,
//! `stop_sequences`, errors in Anthropic's shape, the proxy's key as `x-api-key` or bearer, the
//! serve limits, and the token count.
#![cfg(feature = "serve")]

mod common;

use std::time::Duration;

use common::fake_server::{FakeConfig, FakeServer};
use common::serve::{
    PIECES, assert_corrected_once, assert_sent_two_calls, fake_answering_in_pieces,
    fake_corrected_once, named_events, post_chat_twin, sent_text,
};
use serde_json::{Value, json};
use tagloop::llm::GrammarMode;
use tagloop::policy::{Policies, Policy};
use tagloop::secret::Secret;
use tagloop::serve::{ServeConfig, router};

/// The proxy in front of `fake`, on a free port: `http://127.0.0.1:PORT`.
async fn proxy(fake: &FakeServer, tune: impl FnOnce(&mut ServeConfig)) -> String {
    let mut cfg = ServeConfig::new(fake.base_url.clone());
    cfg.model = Some("fake-model".into());
    cfg.grammar = GrammarMode::Off;
    // As `common::serve::proxy`: the fake turns fill the optional `days` nobody asked for.
    cfg.policies = Policies::all().without(Policy::UnsaidOptional);
    tune(&mut cfg);
    let app = router(cfg).expect("router");
    common::serve_on_loopback(app).await
}

fn tools() -> Value {
    json!([
        {"name": "weather", "description": "Weather of a city.",
         "input_schema": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
            "required": ["city"]}},
        {"name": "time", "description": "Local time of a city.",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
            "required": ["city"]}}
    ])
}

fn ask(extra: Value) -> Value {
    let mut body = json!({
        "model": "claude-like",
        "max_tokens": 256,
        "system": [{"type": "text", "text": "Answer briefly."}],
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": tools(),
    });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    body
}

async fn send(
    base: &str,
    path: &str,
    body: String,
    key: Option<(&str, &str)>,
) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .body(body);
    if let Some((name, value)) = key {
        req = req.header(name, value);
    }
    req.send().await.expect("send")
}

async fn post(base: &str, body: &Value) -> (u16, Value) {
    let r = send(base, "/v1/messages", body.to_string(), None).await;
    let status = r.status().as_u16();
    (status, r.json::<Value>().await.unwrap_or(Value::Null))
}

/// The named events of a streamed answer: (event, data).
async fn stream(base: &str, body: &Value) -> Vec<(String, Value)> {
    let mut body = body.clone();
    body["stream"] = json!(true);
    let r = send(base, "/v1/messages", body.to_string(), None).await;
    assert_eq!(r.status(), 200);
    let text = r.text().await.expect("body");
    named_events(&text)
}

const CALL: &str =
    "<thought>I need the weather.</thought>\n<action>weather(city=\"Paris\", days=2)</action>";

#[tokio::test]
async fn a_call_is_a_tool_use_block_with_an_object_input() {
    let fake = FakeServer::start(FakeConfig::turns([CALL])).await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &ask(json!({}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["type"], "message");
    assert_eq!(v["role"], "assistant");
    assert_eq!(v["model"], "claude-like");
    assert!(v["id"].as_str().unwrap().starts_with("msg_"), "{v}");
    assert_eq!(v["stop_reason"], "tool_use");
    let content = v["content"].as_array().unwrap();
    assert_eq!(content.len(), 1, "no thinking unless asked: {v}");
    assert_eq!(content[0]["type"], "tool_use");
    assert_eq!(content[0]["name"], "weather");
    assert_eq!(content[0]["input"], json!({"city": "Paris", "days": 2}));
    let id = content[0]["id"].as_str().unwrap();
    assert!(id.starts_with("toolu_") && id.len() > 10, "{id}");
    assert!(v["usage"]["input_tokens"].as_u64().unwrap() > 0, "{v}");
    assert!(v["usage"]["output_tokens"].as_u64().unwrap() > 0, "{v}");
    let sent = sent_text(&fake.requests()[0].body);
    assert!(
        sent.contains("Answer briefly.") && sent.contains("weather"),
        "{sent}"
    );
}

#[tokio::test]
async fn thinking_is_a_block_when_asked_for() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<thought>It is known.</thought><final_answer>Sunny.</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let thinking = json!({"thinking": {"type": "enabled", "budget_tokens": 1024}});
    let (status, v) = post(&base, &ask(thinking)).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(
        v["content"],
        json!([
            {"type": "thinking", "thinking": "It is known.", "signature": ""},
            {"type": "text", "text": "Sunny."}
        ])
    );
}

#[tokio::test]
async fn tool_choice_any_corrects_an_answer_into_a_call() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<final_answer>Sunny.</final_answer>",
        CALL,
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &ask(json!({"tool_choice": {"type": "any"}}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["content"][0]["type"], "tool_use", "{v}");
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test]
async fn tool_choice_tool_allows_only_that_tool() {
    let other = "<action>time(city=\"Paris\")</action>";
    let fake = FakeServer::start(FakeConfig::turns([other, CALL])).await;
    let base = proxy(&fake, |_| {}).await;
    let choice = json!({"tool_choice": {"type": "tool", "name": "weather"}});
    let (status, v) = post(&base, &ask(choice)).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["content"][0]["name"], "weather", "{v}");
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test]
async fn tool_choice_none_corrects_a_call_into_text() {
    let fake = FakeServer::start(FakeConfig::turns([
        CALL,
        "<final_answer>No tools.</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &ask(json!({"tool_choice": {"type": "none"}}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["content"], json!([{"type": "text", "text": "No tools."}]));
    assert_eq!(v["stop_reason"], "end_turn");
}

#[tokio::test]
async fn parallel_calls_are_several_blocks_unless_disabled() {
    let two = "<action>weather(city=\"Paris\")</action>\n<action>time(city=\"Paris\")</action>";
    let fake = FakeServer::start(FakeConfig::turns([two, two])).await;
    let base = proxy(&fake, |_| {}).await;
    // The question asks for both: a further call must ask for something the first did not
    // (docs/serve.md), and "time" is a word of the second tool the question says.
    let both =
        json!({"messages": [{"role": "user", "content": "Weather and local time in Paris?"}]});
    let (_, v) = post(&base, &ask(both.clone())).await;
    let names: Vec<&str> = v["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["weather", "time"], "{v}");
    let mut single = both;
    single["tool_choice"] = json!({"type": "auto", "disable_parallel_tool_use": true});
    let (_, v) = post(&base, &ask(single)).await;
    assert_eq!(v["content"].as_array().unwrap().len(), 1, "{v}");
    let stops = fake.requests()[1].body["stop"].to_string();
    assert!(
        stops.contains("</action>"),
        "one call, so </action> is a stop: {stops}"
    );
}

#[tokio::test]
async fn a_two_step_history_round_trips_with_tool_results() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<final_answer>Sunny, 21 °C.</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let body = ask(json!({"messages": [
        {"role": "user", "content": "Weather and time in Paris?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "I look both up."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_2", "name": "time", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "Sunny, 21 °C"}]},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "clock down", "is_error": true}]}
    ]}));
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["content"][0]["text"], "Sunny, 21 °C.");
    let sent = sent_text(&fake.requests()[0].body);
    assert_sent_two_calls(&sent);
    assert!(sent.contains("Error: clock down"), "{sent}");
}

#[tokio::test]
async fn a_streamed_call_is_anthropics_event_sequence() {
    let fake = FakeServer::start(FakeConfig::turns([CALL])).await;
    let base = proxy(&fake, |_| {}).await;
    let events = stream(
        &base,
        &ask(json!({"thinking": {"type": "enabled", "budget_tokens": 1024}})),
    )
    .await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    let block = [
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    ];
    let want = [
        &["message_start", "ping"][..],
        &block,
        &block,
        &["message_delta", "message_stop"],
    ];
    assert_eq!(names, want.concat());
    let start = &events[0].1["message"];
    assert!(start["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(start["content"], json!([]));
    assert!(start["stop_reason"].is_null());
    assert_eq!(events[2].1["content_block"]["type"], "thinking");
    assert_eq!(
        events[3].1["delta"],
        json!({"type": "thinking_delta", "thinking": "I need the weather."})
    );
    assert_eq!(events[5].1["index"], 1);
    assert_eq!(events[5].1["content_block"]["type"], "tool_use");
    assert_eq!(events[5].1["content_block"]["input"], json!({}));
    let delta = &events[6].1["delta"];
    assert_eq!(delta["type"], "input_json_delta");
    let input: Value = serde_json::from_str(delta["partial_json"].as_str().unwrap()).unwrap();
    assert_eq!(input, json!({"city": "Paris", "days": 2}));
    assert_eq!(events[8].1["delta"]["stop_reason"], "tool_use");
    assert!(events[8].1["usage"]["output_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn a_streamed_answer_goes_out_in_text_deltas() {
    let answer = PIECES;
    let fake = fake_answering_in_pieces().await;
    let base = proxy(&fake, |_| {}).await;
    let events = stream(&base, &ask(json!({}))).await;
    let deltas: Vec<&str> = events
        .iter()
        .filter(|(n, _)| n == "content_block_delta")
        .map(|(_, d)| {
            assert_eq!(d["delta"]["type"], "text_delta", "no thinking unless asked");
            d["delta"]["text"].as_str().unwrap()
        })
        .collect();
    assert!(deltas.len() > 1, "streamed in pieces: {deltas:?}");
    assert_eq!(deltas.concat(), answer);
    assert_eq!(events.last().unwrap().0, "message_stop");
}

#[tokio::test]
async fn a_corrected_turn_never_reaches_the_streaming_client() {
    let fake = fake_corrected_once(CALL).await;
    let base = proxy(&fake, |_| {}).await;
    let events = stream(
        &base,
        &ask(json!({"thinking": {"type": "enabled", "budget_tokens": 1024}})),
    )
    .await;
    let all: String = events.iter().map(|(_, d)| d.to_string()).collect();
    assert_corrected_once(&all, &fake);
}

#[tokio::test]
async fn without_tools_the_request_is_a_plain_chat_cut_at_its_stop_sequence() {
    let fake = FakeServer::start(FakeConfig::turns(["Bonjour. END and more"])).await;
    let base = proxy(&fake, |_| {}).await;
    let mut body = ask(json!({"stop_sequences": ["END"]}));
    body.as_object_mut().unwrap().remove("tools");
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["content"], json!([{"type": "text", "text": "Bonjour. "}]));
    assert_eq!(v["stop_reason"], "stop_sequence");
    assert_eq!(v["stop_sequence"], "END");
    let sent = &fake.requests()[0].body;
    assert_eq!(
        sent["messages"],
        json!([
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Weather in Paris?"}])
    );
    assert!(
        sent.get("stop").is_none(),
        "the face cuts, not the upstream: {sent}"
    );
}

#[tokio::test]
async fn an_answer_with_tools_is_cut_at_a_stop_sequence_too() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<final_answer>Sunny. STOP Rainy.</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let (_, v) = post(&base, &ask(json!({"stop_sequences": ["STOP"]}))).await;
    assert_eq!(v["content"][0]["text"], "Sunny. ");
    assert_eq!(v["stop_reason"], "stop_sequence");
}

#[tokio::test]
async fn a_token_limit_is_max_tokens() {
    // The fake writes 4 bytes a token: the limit falls inside the answer's text.
    let fake = FakeServer::start(FakeConfig::turns([
        "<final_answer>Sunny and warm all day long.",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let (_, v) = post(&base, &ask(json!({"max_tokens": 6}))).await;
    assert_eq!(v["stop_reason"], "max_tokens", "{v}");
}

#[tokio::test]
async fn errors_are_in_anthropics_shape() {
    let fake = FakeServer::start(FakeConfig {
        default_reply: "<action>weather(town=\"Paris\")</action>".into(),
        ..FakeConfig::default()
    })
    .await;
    let base = proxy(&fake, |c| c.repairs = 1).await;
    let mut no_max = ask(json!({}));
    no_max.as_object_mut().unwrap().remove("max_tokens");
    for (body, status, kind, words) in [
        (
            no_max.to_string(),
            400,
            "invalid_request_error",
            "max_tokens",
        ),
        (
            "{not json".to_string(),
            400,
            "invalid_request_error",
            "not valid JSON",
        ),
        (
            ask(json!({"tool_choice": {"type": "tool", "name": "nope"}})).to_string(),
            400,
            "invalid_request_error",
            "tool_choice.name",
        ),
        (
            ask(json!({})).to_string(),
            502,
            "api_error",
            "unknown argument `town`",
        ),
    ] {
        let r = send(&base, "/v1/messages", body, None).await;
        assert_eq!(r.status().as_u16(), status);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["type"], "error", "{v}");
        assert_eq!(v["error"]["type"], kind, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(words),
            "{v}"
        );
    }
}

#[tokio::test]
async fn the_proxy_key_is_taken_as_x_api_key_or_bearer() {
    let fake = FakeServer::start(FakeConfig {
        default_reply: CALL.into(),
        ..FakeConfig::default()
    })
    .await;
    let base = proxy(&fake, |c| c.api_key = Some(Secret::new("proxy-key"))).await;
    let body = ask(json!({})).to_string();
    for (key, status) in [
        (None, 401),
        (Some(("x-api-key", "wrong")), 401),
        (Some(("x-api-key", "proxy-key")), 200),
        (Some(("authorization", "Bearer proxy-key")), 200),
    ] {
        let r = send(&base, "/v1/messages", body.clone(), key).await;
        assert_eq!(r.status().as_u16(), status, "{key:?}");
        if status == 401 {
            let v: Value = r.json().await.unwrap();
            assert_eq!(v["error"]["type"], "authentication_error");
        }
    }
    let r = send(&base, "/v1/messages/count_tokens", body, None).await;
    assert_eq!(r.status(), 401);
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test]
async fn the_serve_limits_apply_to_this_face() {
    let fake = FakeServer::start(FakeConfig {
        default_reply: CALL.into(),
        first_byte_delay: Duration::from_millis(1500),
        ..FakeConfig::default()
    })
    .await;
    let base = proxy(&fake, |c| {
        c.max_body = 2000;
        c.concurrency = 1;
    })
    .await;
    let mut big = ask(json!({}));
    big["messages"][0]["content"] = json!("x".repeat(3000));
    let (status, v) = post(&base, &big).await;
    assert_eq!(
        (status, &v["error"]["type"]),
        (413, &json!("request_too_large")),
        "{v}"
    );
    let first = tokio::spawn({
        let base = base.clone();
        async move { post(&base, &ask(json!({}))).await }
    });
    while fake.request_count() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = send(&base, "/v1/messages", ask(json!({})).to_string(), None).await;
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], "1");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "rate_limit_error");
    assert_eq!(first.await.unwrap().0, 200);

    let slow = proxy(&fake, |c| c.timeout = Duration::from_millis(300)).await;
    let (status, v) = post(&slow, &ask(json!({}))).await;
    assert_eq!((status, &v["type"]), (504, &json!("error")), "{v}");
}

#[tokio::test]
async fn count_tokens_asks_the_upstreams_tokenizer_or_says_it_estimates() {
    let fake = FakeServer::start(FakeConfig {
        props: true,
        tokenizer: true,
        ..FakeConfig::default()
    })
    .await;
    let base = proxy(&fake, |_| {}).await;
    let mut body = ask(json!({}));
    body.as_object_mut().unwrap().remove("max_tokens");
    let r = send(&base, "/v1/messages/count_tokens", body.to_string(), None).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-tagloop-token-count"], "tokenizer");
    let counted = r.json::<Value>().await.unwrap()["input_tokens"]
        .as_u64()
        .unwrap();
    assert!(
        counted > 100,
        "the system prompt and tools are counted: {counted}"
    );
    assert!(fake.root_requests().iter().any(|r| r.path == "/tokenize"));
    assert_eq!(fake.request_count(), 0, "no turn is asked for");

    let plain = FakeServer::start(FakeConfig::default()).await;
    let base = proxy(&plain, |_| {}).await;
    let r = send(&base, "/v1/messages/count_tokens", body.to_string(), None).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-tagloop-token-count"], "estimate");
    let estimated = r.json::<Value>().await.unwrap()["input_tokens"]
        .as_u64()
        .unwrap();
    assert!(estimated > 100, "{estimated}");
}

#[tokio::test]
async fn both_faces_send_the_upstream_the_same_request() {
    let fake = FakeServer::start(FakeConfig {
        default_reply: "<final_answer>Sunny.</final_answer>".into(),
        ..FakeConfig::default()
    })
    .await;
    let base = proxy(&fake, |_| {}).await;
    post_chat_twin(&base, &tools(), "input_schema").await;
    let anthropic = ask(json!({"max_tokens": 99, "temperature": 0, "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny"}]}]}));
    let (status, v) = post(&base, &anthropic).await;
    assert_eq!(status, 200, "{v}");
    let sent = fake.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].body, sent[1].body, "one conversation, one turn");
}
