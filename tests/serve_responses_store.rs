//! The Responses face's stored conversations against the fake upstream: `previous_response_id`
//! continues a conversation for the key that made it only (another key can neither continue,
//! read nor delete it), `GET` and `DELETE /v1/responses/{id}`, `store: false`, a streamed
//! response kept before it completes, and the store's file, which a new server reads and which
//! never holds the upstream key.
#![cfg(feature = "serve")]

mod common;

use common::fake_server::{FakeConfig, FakeServer};
use common::responses::{
    CALL, ask, assert_not_theirs, continuation, post, post_as, proxy, send, stream,
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
