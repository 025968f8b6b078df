//! Security (issue 30, items 2 and 3): what a client that connects and then says little or
//! nothing can hold in `tagloop serve` — no key needed.
//!
//! * **Connections** (item 2): connections that send nothing, half a header, or sit idle after
//!   a request are closed after the header timeout; past the connection cap, new connections
//!   wait until one closes (`accept` never runs the process out of descriptors).
//! * **Bodies** (item 3): a body is read only once its request holds a concurrency slot (so
//!   bodies in memory are bounded by the slots), and within the body time limit (408).
//!
//! * **Keyless clients** (issue 44 item 4): a 401 closed nothing, so clients without the key
//!   kept their kept-alive connections, and their places under `--max-connections`, by asking
//!   again now and then; a 401 now closes its connection (`Connection: close`).
//!
//! Loopback only, a handful of sockets, and limits lowered in each test's configuration.
#![cfg(feature = "serve")]

mod common;

use std::time::{Duration, Instant};

use common::fake_server::{FakeConfig, FakeServer};
use tagloop::llm::GrammarMode;
use tagloop::secret::Secret;
use tagloop::serve::ServeConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `tagloop serve` in front of `fake`, on a free loopback port: its address (`127.0.0.1:PORT`).
async fn proxy(fake: &FakeServer, tune: impl FnOnce(&mut ServeConfig)) -> String {
    let mut cfg = ServeConfig::new(fake.base_url.clone());
    cfg.model = Some("fake-model".into());
    cfg.grammar = GrammarMode::Off;
    tune(&mut cfg);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = tagloop::serve::serve(listener, cfg, std::future::pending()).await;
    });
    addr.to_string()
}

/// Everything the server sends on `conn` until it closes it, or `None` if it is still open
/// after `within`.
async fn until_closed(conn: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(within, read).await.ok()?;
    Some(got)
}

/// The status of the first response on `conn`, if one starts within `within`.
async fn status_within(conn: &mut TcpStream, within: Duration) -> Option<u16> {
    let mut head = [0u8; 12];
    tokio::time::timeout(within, conn.read_exact(&mut head))
        .await
        .ok()?
        .ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

const MODELS: &[u8] = b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n";

#[tokio::test]
async fn silent_half_sent_and_idle_connections_are_closed_after_the_header_timeout() {
    let fake = FakeServer::start(FakeConfig::default()).await;
    let addr = proxy(&fake, |c| c.header_timeout = Duration::from_millis(300)).await;
    let mut silent = TcpStream::connect(&addr).await.expect("connect");
    let mut half = TcpStream::connect(&addr).await.expect("connect");
    half.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-le")
        .await
        .expect("write");
    let mut idle = TcpStream::connect(&addr).await.expect("connect");
    idle.write_all(MODELS).await.expect("write");
    assert_eq!(
        status_within(&mut idle, Duration::from_secs(5)).await,
        Some(200)
    );
    for (name, conn) in [
        ("silent", &mut silent),
        ("half a header", &mut half),
        ("idle", &mut idle),
    ] {
        assert!(
            until_closed(conn, Duration::from_secs(5)).await.is_some(),
            "the {name} connection is still open"
        );
    }
}

#[tokio::test]
async fn past_the_connection_cap_a_connection_waits_until_one_closes() {
    let fake = FakeServer::start(FakeConfig::default()).await;
    let addr = proxy(&fake, |c| {
        c.max_connections = 3;
        c.header_timeout = Duration::from_secs(60);
    })
    .await;
    let mut silent = Vec::new();
    for _ in 0..3 {
        silent.push(TcpStream::connect(&addr).await.expect("connect"));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The fourth connects (the listen queue takes it) but is not served while three are open.
    let mut fourth = TcpStream::connect(&addr).await.expect("connect");
    fourth.write_all(MODELS).await.expect("write");
    assert_eq!(
        status_within(&mut fourth, Duration::from_millis(700)).await,
        None
    );
    drop(silent.pop());
    assert_eq!(
        status_within(&mut fourth, Duration::from_secs(5)).await,
        Some(200)
    );
}

#[tokio::test]
async fn a_keyless_client_is_closed_after_its_401_and_holds_no_place() {
    let fake = FakeServer::start(FakeConfig::default()).await;
    let addr = proxy(&fake, |c| {
        c.api_key = Some(Secret::new("proxy-key"));
        c.max_connections = 2;
        c.header_timeout = Duration::from_secs(60);
    })
    .await;
    // Both places taken by clients without the key, each kept alive after its request.
    let mut keyless = Vec::new();
    for path in ["/v1/models", "/v1/messages/count_tokens"] {
        let mut conn = TcpStream::connect(&addr).await.expect("connect");
        let method = if path == "/v1/models" { "GET" } else { "POST" };
        let request = format!(
            "{method} {path} HTTP/1.1\r\nhost: x\r\nconnection: keep-alive\r\ncontent-length: 2\r\n\r\n{{}}"
        );
        conn.write_all(request.as_bytes()).await.expect("write");
        let answer = until_closed(&mut conn, Duration::from_secs(5))
            .await
            .unwrap_or_else(|| panic!("{path}: the keyless connection is still open"));
        let answer = String::from_utf8_lossy(&answer).to_lowercase();
        assert!(answer.starts_with("http/1.1 401"), "{answer}");
        assert!(answer.contains("connection: close"), "{answer}");
        keyless.push(conn);
    }
    // A client with the key gets in at once, the keyless ones still holding their sockets.
    let mut keyed = TcpStream::connect(&addr).await.expect("connect");
    keyed
        .write_all(b"GET /v1/models HTTP/1.1\r\nhost: x\r\nx-api-key: proxy-key\r\n\r\n")
        .await
        .expect("write");
    assert_eq!(
        status_within(&mut keyed, Duration::from_secs(5)).await,
        Some(200)
    );
}

/// A connection that sends the headers of a `content_length`-byte chat request and `sent`
/// bytes of its body, then nothing.
async fn slow_body(addr: &str, content_length: usize, sent: usize) -> TcpStream {
    let mut conn = TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {content_length}\r\n\r\n"
    );
    conn.write_all(head.as_bytes()).await.expect("write");
    conn.write_all(&vec![b' '; sent]).await.expect("write");
    conn
}

#[tokio::test]
async fn a_body_is_read_only_with_a_slot_and_within_the_body_time_limit() {
    let fake = FakeServer::start(FakeConfig::default()).await;
    let addr = proxy(&fake, |c| {
        c.concurrency = 2;
        c.body_timeout = Duration::from_secs(1);
    })
    .await;
    let started = Instant::now();
    let mut conns = Vec::new();
    for _ in 0..5 {
        conns.push(slow_body(&addr, 100_000, 10).await);
    }
    let mut statuses = Vec::new();
    for conn in &mut conns {
        statuses.push(status_within(conn, Duration::from_secs(5)).await);
    }
    statuses.sort();
    // Two hold the slots until their bodies are late; the other three are refused unread.
    assert_eq!(
        statuses,
        vec![Some(408), Some(408), Some(429), Some(429), Some(429)],
        "after {:?}",
        started.elapsed()
    );
    assert_eq!(fake.request_count(), 0);
    // The slots are free again: a whole request is answered.
    let body = br#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#;
    let mut conn = slow_body(&addr, body.len(), 0).await;
    conn.write_all(body).await.expect("write");
    assert_eq!(
        status_within(&mut conn, Duration::from_secs(5)).await,
        Some(200)
    );
}
