//! Connections to the model server are kept across turns (issue 48): a finished streamed answer
//! is read to its end, so its connection goes back to the pool, and only a turn that must be cut
//! drops its stream (and says so). The fake server counts the TCP connections it accepts; it
//! speaks HTTP/1.1 keep-alive, streams chunked SSE and ends each body a moment after `[DONE]`,
//! as vLLM and OpenAI do.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::cli::{Env, outcome};
use common::fake_server::{FakeConfig, FakeServer, StopMode};
use common::openai::{config, ok, request};
use tagloop::llm::openai::OpenAiModel;
use tagloop::llm::{Api, Finish, Model, NoticeKind, NoticeSink, TurnResult};

/// How long after `[DONE]` the fake ends its bodies.
const DONE_DELAY: Duration = Duration::from_millis(40);

/// Three `read_file` calls, then an answer.
fn four_turns() -> FakeConfig {
    let mut turns: Vec<String> = ["a.txt", "b.txt", "c.txt"]
        .iter()
        .map(|f| format!("<thought>Read {f}.</thought>\n<action>read_file(path=\"{f}\")</action>"))
        .collect();
    turns.push("<thought>Done.</thought>\n<final_answer>three files</final_answer>".into());
    let mut cfg = FakeConfig::turns(turns);
    cfg.done_delay = DONE_DELAY;
    cfg
}

/// A fake server on a runtime of its own, for a test that runs the binary.
fn fake_server(cfg: FakeConfig) -> (tokio::runtime::Runtime, FakeServer) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let server = rt.block_on(FakeServer::start(cfg));
    (rt, server)
}

/// `tagloop run` of the four turns against `server`, with `extra` flags: its JSON outcome.
fn run_four(env: &Env, server: &FakeServer, extra: &[&str]) -> serde_json::Value {
    for f in ["a.txt", "b.txt", "c.txt"] {
        std::fs::write(env.path("ws").join(f), "text\n").expect("write");
    }
    let mut args = vec!["--base-url", &server.base_url, "--json"];
    args.extend_from_slice(extra);
    args.push("Read the three files.");
    let out = env.run_model("fake-model", &args).output().expect("run");
    let got = outcome(&out.stdout);
    assert_eq!(
        got["status"],
        "ok",
        "{got}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    got
}

/// A run of four turns (and the server's probes) goes over one connection.
#[test]
fn a_run_of_four_turns_opens_one_connection() {
    let (_rt, server) = fake_server(four_turns());
    run_four(&Env::new(), &server, &[]);
    assert_eq!(server.turns_served(), 4);
    assert_eq!(server.aborted(), 0, "every finished stream read to its end");
    assert_eq!(
        server.connections(),
        1,
        "one connection for the whole run: {:?}, probes {}",
        server.sequence(),
        server.probes()
    );
}

/// A server that closes the connection after each answer (`Connection: close`) still gets every
/// turn, each on a new connection, and no request fails.
#[test]
fn a_server_that_closes_after_each_answer_gets_a_new_connection_each_time() {
    let mut cfg = four_turns();
    cfg.close_after_answer = true;
    let (_rt, server) = fake_server(cfg);
    run_four(&Env::new(), &server, &["--grammar", "off"]);
    let turns = server.requests().len();
    assert_eq!(turns, 4, "no request failed and was sent again");
    assert!(
        server.connections() >= turns,
        "{} connections for {turns} turns",
        server.connections()
    );
}

/// One turn of the usual request, checked (`ok`), and the notices it gave.
async fn noticed_turn(model: &OpenAiModel, label: &str) -> (TurnResult, Vec<NoticeKind>) {
    let mut req = request(Api::Chat);
    let kinds = Arc::new(Mutex::new(Vec::new()));
    let keep = kinds.clone();
    req.notices = Some(NoticeSink::new(move |n| {
        if let Ok(mut k) = keep.lock() {
            k.push(n.kind);
        }
    }));
    let mut deltas = String::new();
    let r = model.turn(&req, &mut |d: &str| deltas.push_str(d)).await;
    let r = ok(r, &deltas, label);
    let kinds = kinds.lock().map(|k| k.clone()).unwrap_or_default();
    (r, kinds)
}

/// Turns the server finishes are read to their end (none aborted) over one connection, and
/// nothing is said about a cut; a server that goes on past a stop it was sent, or that was sent
/// no stop, is cut there, and the turn's notices say so.
#[tokio::test]
async fn only_a_turn_that_must_be_cut_drops_its_stream() {
    let text = format!(
        "<thought>t</thought><action>population(city=\"Paris\")</action><observation>made up</observation>{}",
        " and on".repeat(60)
    );
    for (mode, send_stop, cut) in [
        (StopMode::Strip, true, false),
        (StopMode::Keep, true, false),
        (StopMode::Ignore, true, true),
        (StopMode::Strip, false, true),
    ] {
        let mut fake = FakeConfig::turns([text.as_str(); 3]);
        fake.stop_mode = mode;
        fake.done_delay = DONE_DELAY;
        // The rest of the turn takes the server a second or so: it is still generating.
        fake.chunk_delay = Duration::from_millis(10);
        fake.chunk_bytes = 256;
        let server = FakeServer::start(fake).await;
        let mut cfg = config(&server, Api::Chat, true);
        cfg.send_stop = send_stop;
        let model = OpenAiModel::new(cfg).expect("model");
        for _ in 0..3 {
            let (r, kinds) = noticed_turn(&model, &format!("{mode:?}")).await;
            assert_eq!(r.finish, Finish::Stop("</action>".into()), "{mode:?}");
            assert_eq!(
                kinds.contains(&NoticeKind::StreamCut),
                cut,
                "{mode:?} {send_stop}: {kinds:?}"
            );
        }
        if cut {
            // The server notices a dropped stream at its next write.
            for _ in 0..100 {
                if server.aborted() == 3 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert_eq!(server.aborted(), 3, "{mode:?}: every stream dropped");
        } else {
            assert_eq!(server.aborted(), 0, "{mode:?}: no stream dropped");
            assert_eq!(server.connections(), 1, "{mode:?}: one connection");
        }
    }
}

/// A server that answers 400 to `stream: true` gets the turn again, whole, and every later turn
/// whole; the stops stay enforced on our side (this server ignores them), and the notice says
/// what happened.
#[tokio::test]
async fn a_server_that_refuses_to_stream_gets_whole_requests() {
    let mut fake = FakeConfig::turns(
        ["<thought>t</thought><action>population(city=\"Paris\")</action><observation>made up</observation>";
            2],
    );
    fake.reject_stream = true;
    fake.stop_mode = StopMode::Ignore;
    let server = FakeServer::start(fake).await;
    let model = OpenAiModel::new(config(&server, Api::Chat, true)).expect("model");
    for turn in 0..2 {
        let (r, kinds) = noticed_turn(&model, "turn").await;
        assert_eq!(r.finish, Finish::Stop("</action>".into()));
        assert!(!r.text.contains("made up"), "{}", r.text);
        assert_eq!(
            kinds.contains(&NoticeKind::StreamRejected),
            turn == 0,
            "{kinds:?}"
        );
    }
    let streamed: Vec<bool> = server.requests().iter().map(|r| r.stream()).collect();
    assert_eq!(streamed, [true, false, false]);
}

/// `--no-stream` asks for whole answers from the start, and so does `stream = false` in the
/// provider's section of `tagloop.toml`.
#[test]
fn no_stream_asks_for_whole_answers() {
    let (_rt, server) = fake_server(four_turns());
    run_four(&Env::new(), &server, &["--no-stream"]);
    let streamed: Vec<bool> = server.requests().iter().map(|r| r.stream()).collect();
    assert_eq!(streamed, [false; 4]);

    let (_rt, server) = fake_server(four_turns());
    let env = Env::new();
    let toml = format!(
        "default_model = \"m\"\n[providers.local]\nbase_url = \"{}\"\nstream = false\n[models.m]\nprovider = \"local\"\nmodel = \"fake-model\"\n",
        server.base_url
    );
    std::fs::write(env.path("tagloop.toml"), toml).expect("config");
    for f in ["a.txt", "b.txt", "c.txt"] {
        std::fs::write(env.path("ws").join(f), "text\n").expect("write");
    }
    let out = env
        .cmd()
        .args(["run", "--workspace"])
        .arg(env.path("ws"))
        .args(["--json", "Read the three files."])
        .output()
        .expect("run");
    assert_eq!(outcome(&out.stdout)["status"], "ok");
    let streamed: Vec<bool> = server.requests().iter().map(|r| r.stream()).collect();
    assert_eq!(streamed, [false; 4]);
}

/// One streamed answer, as llama-server writes it: chunked, no `Connection: close`, and the
/// connection closed right after the last chunk.
async fn answer_and_close(mut socket: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // The request: its head, then as many body bytes as `Content-Length` says.
    loop {
        let Ok(n) = socket.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if got.len() >= end + 4 + length {
                break;
            }
        }
    }
    let events = [
        r#"data: {"choices":[{"index":0,"delta":{"content":"<final_answer>ok</final_answer>"}}]}"#,
        r#"data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3}}"#,
        "data: [DONE]",
    ];
    let mut out = String::from(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    );
    for e in events {
        let e = format!("{e}\n\n");
        out.push_str(&format!("{:x}\r\n{e}\r\n", e.len()));
    }
    out.push_str("0\r\n\r\n");
    let _ = socket.write_all(out.as_bytes()).await;
    let _ = socket.shutdown().await;
}

/// A server that closes the connection after each streamed answer without saying so (llama-server
/// does): every turn still succeeds at once, on a new connection, with no retry.
#[tokio::test]
async fn a_server_that_closes_silently_after_each_answer_still_works() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    let server = tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(answer_and_close(socket));
        }
    });
    let mut cfg = tagloop::llm::openai::OpenAiConfig::new(format!("http://{addr}/v1"), "m");
    cfg.grammar = tagloop::llm::GrammarMode::Off;
    cfg.context_window = Some(8192);
    cfg.max_retries = 0;
    let model = OpenAiModel::new(cfg).expect("model");
    for _ in 0..4 {
        let (_, kinds) = noticed_turn(&model, "turn").await;
        assert!(kinds.is_empty(), "{kinds:?}");
        // The tool's step between two turns.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 4);
    server.abort();
}

/// No turn asks for its connection to be closed, streamed or whole, and three turns take one
/// connection either way. (Over plain HTTP a streamed turn used to ask for the close, for
/// llama-server's silent close after a stream: that server is the test above.)
#[tokio::test]
async fn no_turn_asks_for_the_connection_to_close() {
    for stream in [true, false] {
        let mut fake = FakeConfig::turns(["<final_answer>a</final_answer>"; 3]);
        fake.done_delay = DONE_DELAY;
        let server = FakeServer::start(fake).await;
        let model = OpenAiModel::new(config(&server, Api::Chat, stream)).expect("model");
        for _ in 0..3 {
            let mut deltas = String::new();
            let r = model
                .turn(&request(Api::Chat), &mut |d: &str| deltas.push_str(d))
                .await;
            ok(r, &deltas, "turn");
        }
        let reqs = server.requests();
        assert_eq!(reqs.len(), 3, "no retry");
        for r in &reqs {
            assert!(
                !r.header_names.iter().any(|h| h == "connection"),
                "stream={stream}: {:?}",
                r.header_names
            );
        }
        assert_eq!(server.connections(), 1, "stream={stream}");
    }
}
