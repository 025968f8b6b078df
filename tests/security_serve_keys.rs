//! `tagloop serve` and the upstream key, against an upstream that hands the key back: echoed in
//! an error that is not UTF-8 (a Latin-1 page), on every relayed path; and written into its turn
//! (a tool call's argument, the answer's text, its reasoning), whole and streamed, where a
//! stream may split the key between two deltas. The client must never get the key, and nothing
//! else may be lost. (The log lines are in `security_lines.rs`.)
#![cfg(feature = "serve")]

mod common;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use common::fake_server::{FakeConfig, FakeServer};
use futures::StreamExt;
use serde_json::{Value, json};
use tagloop::llm::GrammarMode;
use tagloop::secret::Secret;
use tagloop::serve::{ServeConfig, router};

const KEY: &str = "sk-upstream-0123456789abcdef";

/// The proxy in front of `upstream` (a base URL with `/v1`) with the upstream key [`KEY`]:
/// its base URL with `/v1`.
async fn proxy(upstream: &str, tune: impl FnOnce(&mut ServeConfig)) -> String {
    let mut cfg = ServeConfig::new(upstream);
    cfg.upstream_key = Secret::new(KEY);
    cfg.grammar = GrammarMode::Off;
    tune(&mut cfg);
    let app = router(cfg).expect("router");
    format!("{}/v1", common::serve_on_loopback(app).await)
}

fn holds_key(bytes: &[u8]) -> bool {
    bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes())
}

/// An upstream that refuses everything with a Latin-1 page (`é` as the lone byte 0xE9, not
/// UTF-8) echoing the `Authorization` it got and the request's body.
async fn latin1_upstream() -> String {
    let app = Router::new().fallback(|headers: HeaderMap, body: Bytes| async move {
        let auth = headers
            .get("authorization")
            .map(|v| v.as_bytes().to_vec())
            .unwrap_or_default();
        let page = [
            b"Cl\xe9 refus\xe9e : ".as_slice(),
            &auth,
            b"\nrequ\xeate : ",
            &body,
        ]
        .concat();
        Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .header("content-type", "text/plain; charset=iso-8859-1")
            .body(Body::from(page))
            .expect("response")
    });
    format!("{}/v1", common::serve_on_loopback(app).await)
}

#[tokio::test]
async fn an_error_that_is_not_utf8_is_redacted_on_every_relayed_path() {
    let base = proxy(&latin1_upstream().await, |_| {}).await;
    let client = reqwest::Client::new();
    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    // A client can make any answer non-UTF-8 with one byte in a body an upstream echoes.
    let completions = [b"{\"model\": \"m\", \"prompt\": \"\xff\"}".as_slice()].concat();
    let answers = [
        client
            .post(format!("{base}/chat/completions"))
            .body(chat.to_string()),
        client.post(format!("{base}/completions")).body(completions),
        client.get(format!("{base}/models")),
    ];
    for (n, request) in answers.into_iter().enumerate() {
        let response = request.send().await.expect("send");
        assert_eq!(response.status(), 401, "request {n}");
        let body = response.bytes().await.expect("body");
        // Still the upstream's page, not UTF-8, its bytes kept: only the key is gone.
        assert!(
            body.starts_with(b"Cl\xe9 refus\xe9e : Bearer [redacted]\n"),
            "request {n}: {body:?}"
        );
        assert!(!holds_key(&body), "request {n}: {body:?}");
    }
}

/// A tools request for `weather(city)`.
fn ask(stream: bool) -> Value {
    json!({
        "model": "m",
        "stream": stream,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}}],
    })
}

/// POST `body` to the proxy: the status and the whole body as text.
async fn post(base: &str, body: &Value) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("{base}/chat/completions"))
        .json(body)
        .send()
        .await
        .expect("send");
    let status = response.status().as_u16();
    (status, response.text().await.expect("text"))
}

/// The answer's text (`content`) and the calls' arguments of a whole or streamed answer.
fn read_answer(body: &str, stream: bool) -> (String, Vec<Value>) {
    let messages: Vec<Value> = if stream {
        body.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .map(|c| c["choices"][0]["delta"].clone())
            .collect()
    } else {
        let v: Value = serde_json::from_str(body).expect("json");
        vec![v["choices"][0]["message"].clone()]
    };
    let mut content = String::new();
    let mut args = Vec::new();
    for m in messages {
        content.push_str(m["content"].as_str().unwrap_or(""));
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            let text = call["function"]["arguments"].as_str().unwrap_or("null");
            args.push(serde_json::from_str(text).expect("arguments are JSON"));
        }
    }
    (content, args)
}

#[tokio::test]
async fn an_upstream_that_writes_the_key_into_its_turn_does_not_hand_it_to_the_client() {
    for stream in [false, true] {
        let sessions = tempfile::tempdir().expect("tempdir");
        // A call whose argument is the header the upstream got, then an answer that quotes the
        // key, streamed two characters a delta (so the key is split between many deltas).
        let fake = FakeServer::start(FakeConfig {
            token_chars: 2,
            ..FakeConfig::turns([
                // "Paris" is the question's: the call is not declined as ungrounded.
                format!("<action>weather(city=\"Paris Bearer {KEY}\")</action>"),
                format!("<final_answer>Your key is {KEY}, keep it safe.</final_answer>"),
            ])
        })
        .await;
        let base = proxy(&fake.base_url, |c| {
            c.model = Some("fake-model".into());
            c.session_dir = Some(sessions.path().to_owned());
        })
        .await;

        let (status, body) = post(&base, &ask(stream)).await;
        assert_eq!(status, 200, "stream={stream}: {body}");
        assert!(!holds_key(body.as_bytes()), "stream={stream}: {body}");
        let (_, calls) = read_answer(&body, stream);
        assert_eq!(
            calls,
            [json!({"city": "Paris Bearer [redacted]"})],
            "stream={stream}"
        );

        let (status, body) = post(&base, &ask(stream)).await;
        assert_eq!(status, 200, "stream={stream}: {body}");
        assert!(!holds_key(body.as_bytes()), "stream={stream}: {body}");
        let (content, _) = read_answer(&body, stream);
        assert_eq!(
            content, "Your key is [redacted], keep it safe.",
            "stream={stream}"
        );

        // The proxy's transcripts hold the upstream's turns: redacted too. (A streamed
        // answer's is written as its task ends, just after the client read the last chunk.)
        let mut files = Vec::new();
        for _ in 0..100 {
            files = std::fs::read_dir(sessions.path())
                .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
                .unwrap_or_default();
            if files.len() == 2 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(files.len(), 2, "stream={stream}");
        for file in files {
            let text = std::fs::read(&file).expect("read");
            assert!(
                !holds_key(&text),
                "stream={stream}: {}",
                String::from_utf8_lossy(&text)
            );
        }
    }
}

#[tokio::test]
async fn a_streamed_pass_through_that_writes_the_key_is_redacted_even_split_across_chunks() {
    // The key echoed inside one event, cut between chunks (twice), as a relayed stream has it.
    let event = format!("data: {{\"said\": \"Bearer {KEY}\"}}\n\n");
    let cuts = [event.len() - 20, event.len() - 9];
    let pieces = vec![
        event[..cuts[0]].to_owned(),
        event[cuts[0]..cuts[1]].to_owned(),
        event[cuts[1]..].to_owned(),
        "data: [DONE]\n\n".to_owned(),
    ];
    let app = Router::new().fallback(move || {
        let pieces = pieces.clone();
        async move {
            let chunks = futures::stream::iter(pieces).then(|p| async move {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                Ok::<_, std::io::Error>(Bytes::from(p))
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(chunks))
                .expect("response")
        }
    });
    let upstream = format!("{}/v1", common::serve_on_loopback(app).await);
    let base = proxy(&upstream, |_| {}).await;
    let chat =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let (status, body) = post(&base, &chat).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        "data: {\"said\": \"Bearer [redacted]\"}\n\ndata: [DONE]\n\n"
    );
}

#[tokio::test]
async fn a_refused_turn_that_holds_the_key_does_not_hand_it_to_the_client() {
    // A call whose argument fails the tool's schema: the refusal quotes the value, and the
    // client's 502 says why the last turn was refused (under `required`: under `auto` a spent
    // repair budget gets an answer-only turn instead of a 502).
    let turn = format!("<action>weather(days=\"Bearer {KEY}\")</action>");
    let fake = FakeServer::start(FakeConfig::turns([turn.clone(), turn])).await;
    let base = proxy(&fake.base_url, |c| {
        c.model = Some("fake-model".into());
        c.repairs = 0;
    })
    .await;
    let mut body = ask(false);
    body["tools"][0]["function"]["parameters"]["properties"]["days"] = json!({"type": "integer"});
    body["tool_choice"] = json!("required");
    let (status, text) = post(&base, &body).await;
    assert_eq!(status, 502, "{text}");
    assert!(text.contains("refused"), "{text}");
    assert!(!holds_key(text.as_bytes()), "{text}");
    body["stream"] = json!(true);
    let (status, text) = post(&base, &body).await;
    assert_eq!(status, 502, "{text}");
    assert!(!holds_key(text.as_bytes()), "{text}");
}
