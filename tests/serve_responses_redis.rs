//! The Responses face's stored conversations in Redis (`ServeConfig::store_redis`, `--store`):
//! two serve routers on one Redis are one conversation space (a response stored through one is
//! read, continued and deleted through the other) bound to the key that made it; the size bound
//! holds in Redis; nothing kept there holds the upstream key; and a Redis that is down or does
//! not answer is an error in the Responses shape within seconds, at setup and per request, and
//! one restarted is found again.
//!
//! A real `redis-server` on loopback (`common/redis.rs`, as the queue's tests use).
#![cfg(feature = "serve")]

mod common;

use std::time::{Duration, Instant};

use common::fake_server::{FakeConfig, FakeServer};
use common::redis::Redis;
use common::responses::{CALL, ask, assert_not_theirs, continuation, post_as, proxy, send};
use common::serve::sent_text;
use serde_json::{Value, json};
use tagloop::secret::Secret;
use tagloop::serve::ServeConfig;

const UPSTREAM_KEY: &str = "sk-upstream-0123456789abcdef";

fn on(url: &str) -> impl Fn(&mut ServeConfig) + '_ {
    move |c: &mut ServeConfig| {
        c.store_redis = Some(Secret::new(url));
        c.upstream_key = Secret::new(UPSTREAM_KEY);
    }
}

/// Every value under the store's keys, as text.
fn everything_in(redis: &Redis) -> String {
    let client = ::redis::Client::open(redis.url("0")).unwrap();
    let mut c = client.get_connection().unwrap();
    let keys: Vec<String> = ::redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    let mut all = String::new();
    for k in keys {
        let dump: Vec<u8> = ::redis::cmd("DUMP").arg(&k).query(&mut c).unwrap();
        all.push_str(&k);
        all.push_str(&String::from_utf8_lossy(&dump));
    }
    all
}

fn command<T: ::redis::FromRedisValue>(redis: &Redis, args: &[&str]) -> T {
    let client = ::redis::Client::open(redis.url("0")).unwrap();
    let mut c = client.get_connection().unwrap();
    let mut cmd = ::redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut c).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_redis_share_conversations_bound_to_their_key() {
    let redis = Redis::start();
    let url = redis.url("0");
    let fake = FakeServer::start(FakeConfig::turns([
        CALL,
        "<final_answer>Sunny, 21 °C.</final_answer>",
    ]))
    .await;
    let one = proxy(&fake, on(&url)).await;
    let two = proxy(&fake, on(&url)).await;
    let (alice, bob) = (Some("key-alice"), Some("key-bob"));

    let body = ask(json!({"input": format!("Weather in Paris? My key is {UPSTREAM_KEY}.")}));
    let (status, first) = post_as(&one, &body, alice).await;
    assert_eq!(status, 200, "{first}");
    let id = first["id"].as_str().unwrap();
    let next = continuation(&first);

    // Through the other server, another key can neither continue, read nor delete it.
    assert_not_theirs(&two, &next, id, bob).await;
    let path = format!("/v1/responses/{id}");
    assert_eq!(fake.request_count(), 1);

    // The key that made it continues it through the other server, with the whole conversation.
    let (status, second) = post_as(&two, &next, alice).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["previous_response_id"], id);
    let sent = sent_text(&fake.requests()[1].body);
    assert!(sent.contains("Weather in Paris?"), "{sent}");
    assert!(sent.contains("<observation>\nSunny, 21 °C"), "{sent}");

    // Each server reads what the other stored; a DELETE through one is gone for both.
    let second_path = format!("/v1/responses/{}", second["id"].as_str().unwrap());
    let r = send(&one, reqwest::Method::GET, &second_path, None, alice).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap(), second);
    let r = send(&two, reqwest::Method::DELETE, &path, None, alice).await;
    assert_eq!(r.json::<Value>().await.unwrap()["deleted"], true);
    for base in [&one, &two] {
        let r = send(base, reqwest::Method::GET, &path, None, alice).await;
        assert_eq!(r.status(), 404);
    }

    // Neither key nor the upstream key is in Redis; a record expires with the store's age.
    let all = everything_in(&redis);
    for secret in [UPSTREAM_KEY, "key-alice", "key-bob"] {
        assert!(!all.contains(secret), "Redis holds {secret}");
    }
    let record = format!("{{tagloop-responses}}:r:{}", second["id"].as_str().unwrap());
    let ttl: i64 = command(&redis, &["TTL", &record]);
    assert!(ttl > 29 * 86_400 && ttl <= 30 * 86_400, "ttl {ttl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_size_bound_holds_in_redis_the_oldest_going_first() {
    let redis = Redis::start();
    let url = redis.url("0");
    let fake = FakeServer::start(FakeConfig {
        default_reply: "<final_answer>Sunny.</final_answer>".into(),
        ..FakeConfig::default()
    })
    .await;
    const BOUND: u64 = 30_000;
    let base = proxy(&fake, |c| {
        on(&url)(c);
        c.store_max_bytes = BOUND;
    })
    .await;
    let mut ids = Vec::new();
    for i in 0..40 {
        let (status, v) = post_as(&base, &ask(json!({"input": format!("turn {i}")})), None).await;
        assert_eq!(status, 200, "{v}");
        ids.push(v["id"].as_str().unwrap().to_string());
    }
    let path = |id: &str| format!("/v1/responses/{id}");
    let r = send(&base, reqwest::Method::GET, &path(&ids[0]), None, None).await;
    assert_eq!(r.status(), 404, "the oldest was kept");
    let r = send(&base, reqwest::Method::GET, &path(&ids[39]), None, None).await;
    assert_eq!(r.status(), 200);
    let total: u64 = command(&redis, &["GET", "{tagloop-responses}:bytes"]);
    assert!(total <= BOUND && total > BOUND / 2, "total {total}");
    let sizes: Vec<u64> = command(&redis, &["HVALS", "{tagloop-responses}:sizes"]);
    assert_eq!(sizes.iter().sum::<u64>(), total, "the index is exact");
    let records: Vec<String> = command(&redis, &["KEYS", "{tagloop-responses}:r:*"]);
    assert_eq!(
        records.len(),
        sizes.len(),
        "a record outlived its index entry"
    );
    // Exactly the youngest are kept, in the order they were made, though most were made in
    // the same second (the ids are time-ordered: a random id let a younger one go first).
    let dropped = ids.len() - sizes.len();
    for (i, id) in ids.iter().enumerate() {
        let r = send(&base, reqwest::Method::GET, &path(id), None, None).await;
        let want = if i < dropped { 404 } else { 200 };
        assert_eq!(r.status(), want, "response {i} of {}", ids.len());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_is_down_is_an_error_in_the_responses_shape_within_seconds() {
    let mut redis = Redis::start();
    let url = redis.url("0");
    let fake = FakeServer::start(FakeConfig {
        default_reply: "<final_answer>Sunny.</final_answer>".into(),
        ..FakeConfig::default()
    })
    .await;
    let base = proxy(&fake, on(&url)).await;
    let (status, first) = post_as(&base, &ask(json!({})), None).await;
    assert_eq!(status, 200, "{first}");
    let path = format!("/v1/responses/{}", first["id"].as_str().unwrap());
    // A Redis restarted (its data kept) is found again: the idle connection, broken, is replaced.
    redis.restart();
    let r = send(&base, reqwest::Method::GET, &path, None, None).await;
    assert_eq!(r.status(), 200);
    redis.stop();

    let started = Instant::now();
    let next = json!({"model": "m", "previous_response_id": first["id"], "input": "And now?"});
    let (status, v) = post_as(&base, &next, None).await;
    assert_eq!(status, 500, "{v}");
    assert_eq!(v["error"]["type"], "server_error", "{v}");
    assert_eq!(v["error"]["code"], "server_error", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("could not be reached"), "{message}");
    assert!(
        !message.contains("127.0.0.1"),
        "the address reached a client: {message}"
    );
    let r = send(&base, reqwest::Method::GET, &path, None, None).await;
    assert_eq!(r.status(), 500);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // A response that cannot be kept is still answered (the log says it was not kept).
    let (status, v) = post_as(&base, &ask(json!({})), None).await;
    assert_eq!(status, 200, "{v}");

    // At setup: a Redis refusing connections, or one that never answers, fails the router.
    let mut cfg = ServeConfig::new(fake.base_url.clone());
    cfg.store_redis = Some(Secret::new(url.clone()));
    let err = tagloop::serve::router(cfg).expect_err("a router without its store");
    assert!(err.to_string().contains("could not be reached"), "{err}");
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut cfg = ServeConfig::new(fake.base_url.clone());
    let at = silent.local_addr().unwrap();
    cfg.store_redis = Some(Secret::new(format!("redis://:hunter2@{at}/0")));
    let started = Instant::now();
    let err = tagloop::serve::router(cfg).expect_err("a router without its store");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let err = err.to_string();
    assert!(err.contains("could not be reached"), "{err}");
    assert!(!err.contains("hunter2"), "the password was shown: {err}");
}
