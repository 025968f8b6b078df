//! The Responses face's stored conversations against the fake upstream: `previous_response_id`
//! continues a conversation for the key that made it only (another key can neither continue,
//! read nor delete it), `GET` and `DELETE /v1/responses/{id}`, `store: false`, a streamed
//! response kept before it completes, and the store's file, which a new server reads and which
//! never holds the upstream key.
#![cfg(feature = "serve")]

mod common;

use common::fake_server::{FakeConfig, FakeServer};
use common::responses::{
    CALL, ask, assert_not_theirs, continuation, post, post_as, proxy, send, stream, tools,
};
use common::serve::sent_text;
use serde_json::{Value, json};
use tagloop::secret::Secret;
use tagloop::serve::ServeConfig;

#[tokio::test]
async fn previous_response_id_continues_a_stored_conversation_for_its_key_only() {
    let fake = FakeServer::start(FakeConfig::turns([
        CALL,
        "<final_answer>Sunny, 21 °C.</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let alice = Some("key-alice");
    let bob = Some("key-bob");
    let (status, first) = post_as(&base, &ask(json!({})), alice).await;
    assert_eq!(status, 200, "{first}");
    let id = first["id"].as_str().unwrap();
    let next = continuation(&first);

    // Another key can neither continue, read nor delete it, and learns nothing of it.
    assert_not_theirs(&base, &next, id, bob).await;
    let path = format!("/v1/responses/{id}");
    assert_eq!(fake.request_count(), 1);

    let (status, v) = post_as(&base, &next, alice).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["previous_response_id"], id);
    assert_eq!(v["output"][0]["content"][0]["text"], "Sunny, 21 °C.");
    let sent = sent_text(&fake.requests()[1].body);
    assert!(
        sent.contains("Weather in Paris?"),
        "the first question is kept: {sent}"
    );
    assert!(
        sent.contains("<action>weather(city=\"Paris\", days=2)</action>"),
        "{sent}"
    );
    assert!(sent.contains("<observation>\nSunny, 21 °C"), "{sent}");
    assert!(
        !sent.contains("Answer briefly."),
        "instructions are not carried over: {sent}"
    );

    let r = send(&base, reqwest::Method::GET, &path, None, alice).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap(), first);
    let r = send(&base, reqwest::Method::DELETE, &path, None, alice).await;
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v,
        json!({"id": id, "object": "response.deleted", "deleted": true})
    );
    let r = send(&base, reqwest::Method::GET, &path, None, alice).await;
    assert_eq!(r.status(), 404);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "not_found");
}

#[tokio::test]
async fn store_false_keeps_nothing_and_a_streamed_response_is_stored_before_it_completes() {
    let fake = FakeServer::start(FakeConfig {
        default_reply: "<final_answer>Sunny.</final_answer>".into(),
        ..FakeConfig::default()
    })
    .await;
    let base = proxy(&fake, |_| {}).await;
    let (_, v) = post(&base, &ask(json!({"store": false}))).await;
    assert_eq!(v["store"], false);
    let r = send(
        &base,
        reqwest::Method::GET,
        &format!("/v1/responses/{}", v["id"].as_str().unwrap()),
        None,
        None,
    )
    .await;
    assert_eq!(r.status(), 404);

    let events = stream(&base, &ask(json!({}))).await;
    let (name, done) = events.last().unwrap();
    assert_eq!(name, "response.completed");
    let id = done["response"]["id"].as_str().unwrap();
    let r = send(
        &base,
        reqwest::Method::GET,
        &format!("/v1/responses/{id}"),
        None,
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap(), done["response"]);
}

#[tokio::test]
async fn stored_responses_survive_a_new_server_and_never_hold_the_upstream_key() {
    const UPSTREAM_KEY: &str = "sk-upstream-9876543210fedcba";
    let fake = FakeServer::start(FakeConfig {
        default_reply: format!("<final_answer>The key is {UPSTREAM_KEY}.</final_answer>"),
        ..FakeConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let tune = |c: &mut ServeConfig| {
        c.data_dir = Some(dir.path().to_path_buf());
        c.upstream_key = Secret::new(UPSTREAM_KEY);
    };
    let first = proxy(&fake, tune).await;
    let body = ask(json!({"input": format!("Is {UPSTREAM_KEY} your key?")}));
    let (status, v) = post(&first, &body).await;
    assert_eq!(status, 200, "{v}");
    assert!(!v.to_string().contains(UPSTREAM_KEY), "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    let file = std::fs::read(dir.path().join("responses.redb")).unwrap();
    let held = file
        .windows(UPSTREAM_KEY.len())
        .any(|w| w == UPSTREAM_KEY.as_bytes());
    assert!(!held, "the store holds the upstream key");

    let second = proxy(&fake, tune).await;
    let r = send(
        &second,
        reqwest::Method::GET,
        &format!("/v1/responses/{id}"),
        None,
        None,
    )
    .await;
    assert_eq!(
        r.status(),
        200,
        "a new server on the same data directory reads it"
    );
    let next = json!({"model": "m", "previous_response_id": id, "input": "And now?"});
    let (status, v) = post(&second, &next).await;
    assert_eq!(status, 200, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_keeps_stored_responses_in_its_data_dir_across_a_restart() {
    let fake = FakeServer::start(FakeConfig {
        default_reply: CALL.into(),
        ..FakeConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let args = ["--model", "fake-model", "--data-dir", data];
    let id = {
        let serve = common::serve_proc::Serve::start(&fake.base_url, &args);
        let base = serve.base_url.trim_end_matches("/v1").to_string();
        let (status, v) = post_as(&base, &ask(json!({})), Some("k")).await;
        assert_eq!(status, 200, "{v}\n{}", serve.log());
        v["id"].as_str().unwrap().to_string()
    };
    assert!(dir.path().join("responses.redb").exists());
    let serve = common::serve_proc::Serve::start(&fake.base_url, &args);
    let base = serve.base_url.trim_end_matches("/v1").to_string();
    let path = format!("/v1/responses/{id}");
    let r = send(&base, reqwest::Method::GET, &path, None, Some("k")).await;
    assert_eq!(r.status(), 200, "{}", serve.log());
    let r = send(&base, reqwest::Method::GET, &path, None, Some("another")).await;
    assert_eq!(r.status(), 404);
}

/// Serve's own time for a continuation of a 100-turn conversation, end to end over HTTP (a
/// measurement, BENCHMARKS.md *The Responses face's store*; run it on its own, in release):
/// the fake upstream answers at once, so a request's whole time is serve's (and the loopback's).
/// A one-turn request with the same tools is the baseline; the continuation is timed with
/// `store: false` (reading the conversation) and `store: true` (also keeping the new turn, one
/// commit of the store's file, as a client's default does).
#[tokio::test]
#[ignore = "a measurement: cargo test --release --test serve_responses_store -- --ignored --nocapture"]
async fn a_hundred_turn_continuation_costs_serve_a_few_milliseconds() {
    use std::time::{Duration, Instant};
    use tagloop::policy::{Policies, Policy};

    // Each turn calls with other arguments (a call repeated with its result in view is
    // refused), and the last one again for the timed requests.
    let call = |days: usize| {
        format!("<thought>Again.</thought>\n<action>weather(city=\"Paris\", days={days})</action>")
    };
    let fake = FakeServer::start(FakeConfig {
        turns: (1..=100).map(call).collect(),
        default_reply: call(101),
        ..FakeConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let base = proxy(&fake, |c| {
        c.data_dir = Some(dir.path().to_path_buf());
        // Every turn is a call: no rule may turn one into an answer.
        let names: Vec<&str> = Policy::ALL.iter().map(|p| p.name()).collect();
        c.policies = Policies::off(&names).unwrap();
    })
    .await;
    let (status, mut last) = post(&base, &ask(json!({}))).await;
    assert_eq!(status, 200, "{last}");
    // The same conversation as items, for a client that sends it whole instead.
    let mut items = vec![json!({"role": "user", "content": "Weather in Paris?"})];
    for _ in 1..100 {
        let next = continuation(&last);
        items.extend(last["output"].as_array().unwrap().iter().cloned());
        items.extend(next["input"].as_array().unwrap().iter().cloned());
        let (status, v) = post(&base, &next).await;
        assert_eq!(status, 200, "{v}");
        last = v;
    }
    let next = continuation(&last);
    items.extend(last["output"].as_array().unwrap().iter().cloned());
    items.extend(next["input"].as_array().unwrap().iter().cloned());
    let whole = json!({"model": "gpt-like", "tools": tools(), "input": items, "store": false});
    // One client for every timed request: making one loads the system's certificates, which
    // would cost more than serve does.
    let client = reqwest::Client::new();
    let url = format!("{base}/v1/responses");
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(20);
    let time = |body: Value| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let mut took = Vec::with_capacity(runs);
            for _ in 0..runs {
                let started = Instant::now();
                let r = client.post(&url).json(&body).send().await.unwrap();
                let status = r.status();
                let v: Value = r.json().await.unwrap();
                took.push(started.elapsed());
                assert_eq!(status, 200, "{v}");
            }
            took.sort();
            took[runs / 2]
        }
    };
    let mut read_only = continuation(&last);
    read_only["store"] = json!(false);
    let mut one_turn = ask(json!({}));
    one_turn["store"] = json!(false);
    let baseline: Duration = time(one_turn).await;
    let sent_whole = time(whole).await;
    let reading = time(read_only).await;
    let keeping = time(continuation(&last)).await;
    println!(
        "median of {runs}: one turn {baseline:?}; the 100 turns sent whole {sent_whole:?}; \
         continued by previous_response_id {reading:?} (store: false), {keeping:?} (store: true)"
    );
    let sent = sent_text(&fake.requests().last().unwrap().body);
    assert!(
        sent.matches("<observation>").count() >= 100,
        "the whole conversation went upstream"
    );
}
