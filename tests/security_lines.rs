//! Forged lines: text from outside that holds a newline (or an escape sequence) must not start a
//! line of tagloop's own output in a one-line field. An upstream's error text in `tagloop
//! serve`'s log, and a model id a server lists (picked by `run` without `--model`) in the
//! header of `run`'s live view and of `replay`; the same error on the plain Messages path
//! (issue 44 item 7). Multi-line text (the answer) keeps its lines.

mod common;

use axum::Router;
use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use common::cli::Env;
use common::fake_server::{FakeConfig, FakeServer};
use common::serve_proc::Serve;
use serde_json::json;

/// What a forged line says; never at the start of a line, only inside an escaped one.
const FORGED: &str = "INFO request method=\"POST\" path=\"/v1/chat/completions\" status=200";

/// An upstream that refuses every request with an error whose message forges a log line and
/// clears the screen.
async fn forging_upstream() -> String {
    let app = Router::new().fallback(|| async {
        let message = format!("bad request\r\n2026-01-01T00:00:00.000000Z  {FORGED}\n\x1b[2J");
        Response::builder()
            .status(StatusCode::BAD_REQUEST)
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"error": {"message": message, "type": "invalid_request_error"}}).to_string(),
            ))
            .expect("response")
    });
    format!("{}/v1", common::serve_on_loopback(app).await)
}

/// Ask serve, in front of the forging upstream, `body` at `path`: the request fails (502), and
/// serve's log holds the upstream's text escaped on the line that carries it, never a line of
/// its own.
async fn no_forged_line(path: &str, body: serde_json::Value) {
    let upstream = forging_upstream().await;
    let serve = Serve::start(&upstream, &["--model", "m", "--grammar", "off"]);
    let response = reqwest::Client::new()
        .post(format!("{}{path}", serve.base_url))
        .json(&body)
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 502, "{path}");
    // The request's own line ends the request's logging (bounded wait for the pipe).
    let mut log = String::new();
    for _ in 0..100 {
        log = serve.log();
        if log.contains("status=502") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(log.contains("status=502"), "{path}: {log}");
    // The upstream's text is in the log, escaped on the line that carries it...
    assert!(log.contains(r"bad request\r\n2026-01-01"), "{path}: {log}");
    assert!(log.contains(r"\n\u{1b}[2J"), "{path}: {log}");
    // ... and starts no line of its own, nor reaches the terminal as an escape.
    for line in log.lines() {
        assert!(
            !line.contains(FORGED) || line.contains("WARN"),
            "{path} forged: {line}"
        );
        assert!(!line.starts_with("2026-01-01"), "{path} forged: {line}");
    }
    assert!(!log.contains('\x1b'), "{path}: {log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_error_cannot_forge_a_line_of_serves_log() {
    let ask = json!({
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    });
    no_forged_line("/chat/completions", ask).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_error_cannot_forge_a_line_on_the_plain_messages_path() {
    // Issue 44 item 7: a Messages request without tools (`serve/plain.rs`) logged it raw.
    let ask =
        json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
    no_forged_line("/messages", ask).await;
}

/// A server that serves one model, whose id forges a header line.
const ID: &str = "m\nmodel forged · session forged\x1b]0;title\x07";

#[test]
fn a_model_id_cannot_forge_a_header_line_of_run_or_replay() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut cfg = FakeConfig::turns(["<final_answer>line one\nline two</final_answer>"]);
    cfg.served_models = Some(vec![ID.to_owned()]);
    let server = rt.block_on(FakeServer::start(cfg));
    let env = Env::new();
    let run = env
        .cmd()
        .args(["run", "--base-url", &server.base_url, "t"])
        .assert()
        .code(0);
    let out = run.get_output();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // The model was used as the server named it.
    assert_eq!(server.requests()[0].body["model"], ID);
    // The answer keeps its lines (multi-line text).
    assert_eq!(stdout, "line one\nline two\n");
    let replay = env.cmd().args(["replay", "last"]).assert().code(0);
    let replayed = String::from_utf8_lossy(&replay.get_output().stdout).into_owned();
    for (what, text) in [("run", &stderr), ("replay", &replayed)] {
        assert!(
            text.contains(r"model m\nmodel forged · session forged\u{1b}]0;title\u{7}"),
            "{what}: {text}"
        );
        for line in text.lines() {
            assert!(!line.starts_with("model forged"), "{what} forged: {line}");
        }
        assert!(!text.contains('\x1b'), "{what}: {text:?}");
    }
}
