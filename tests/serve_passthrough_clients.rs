//! Real clients through `tagloop serve`'s pass-through (`src/serve/passthrough/`): the official
//! `openai` SDK's embeddings, model lookup and multipart upload (`tests/py/openai_passthrough.py`),
//! and a 100 MiB streamed answer read through the real binary with its memory measured. serve
//! runs as the real binary on a free port, with its own key, in front of the fake upstream.

mod common;

use std::time::Duration;

use common::fake_server::{FakeConfig, FakeServer};
use common::py::run_script;
use common::serve_proc::Serve;

/// serve's own key, as `tests/py/openai_passthrough.py` sends it.
const SERVE_KEY: &str = "sk-serve-clients-key-0123456789";
const UPSTREAM_KEY: &str = "sk-upstream-clients-key-9876543210";

/// `tagloop serve` with both keys in front of `upstream`.
fn keyed_serve(upstream: &FakeServer) -> Serve {
    Serve::start_with_env(
        &upstream.base_url,
        &[
            "--model",
            "fake-model",
            "--api-key-env",
            "PASSTHROUGH_SERVE_KEY",
            "--upstream-key-env",
            "PASSTHROUGH_UPSTREAM_KEY",
        ],
        &[
            ("PASSTHROUGH_SERVE_KEY", SERVE_KEY),
            ("PASSTHROUGH_UPSTREAM_KEY", UPSTREAM_KEY),
        ],
    )
}

#[test]
fn the_openai_sdk_embeds_looks_up_a_model_and_uploads_through_serve() {
    common::py::python();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let upstream = rt.block_on(FakeServer::start(FakeConfig::default()));
    let serve = keyed_serve(&upstream);
    let run = run_script(
        "openai_passthrough.py",
        &serve.base_url,
        "fake-model",
        Duration::from_secs(120),
    );
    assert!(
        run.ok && run.stdout.contains("openai_passthrough: ok"),
        "--- stdout\n{}\n--- stderr\n{}\n--- tagloop serve\n{}",
        run.stdout,
        run.stderr,
        serve.log()
    );
    let passed = upstream.passed();
    let targets: Vec<&str> = passed.iter().map(|p| p.target.as_str()).collect();
    // The wrong key's request never reached the upstream.
    assert_eq!(
        targets,
        [
            "/v1/embeddings",
            "/v1/embeddings",
            "/v1/models/fake-model",
            "/v1/audio/transcriptions"
        ]
    );
    for p in &passed {
        assert_eq!(
            p.headers["authorization"],
            format!("Bearer {UPSTREAM_KEY}").as_str()
        );
    }
    // The upload arrived byte for byte inside the SDK's multipart body, under its boundary.
    let upload: Vec<u8> = (0..=255u8).cycle().take(256 * 1200).collect();
    let body = &passed[3].body;
    assert!(
        memchr::memmem::find(body, &upload).is_some(),
        "the uploaded file did not arrive as sent"
    );
    let ct = passed[3].headers["content-type"].to_str().expect("ct");
    assert!(ct.starts_with("multipart/form-data; boundary="), "{ct}");
    // One log line a request, the path quoted as outside text, never a key.
    let log = serve.log();
    assert!(
        log.contains("path=/v1/models/fake-model") && log.contains("passthrough=true"),
        "{log}"
    );
    assert!(
        !log.contains(SERVE_KEY) && !log.contains(UPSTREAM_KEY),
        "{log}"
    );
}

/// The process's peak resident memory (`VmHWM`), in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// A streamed answer of 100 MiB, read through serve as a client reads it.
const LARGE: u64 = 100 << 20;

/// serve's peak memory bound while it relays [`LARGE`] (measured: docs/security.md,
/// BENCHMARKS.md): far below the answer's size, so no copy of it is held.
const PEAK_LIMIT_KIB: u64 = 64 << 10;

#[test]
fn a_100_mib_streamed_answer_passes_through_in_bounded_memory() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let upstream = rt.block_on(FakeServer::start(FakeConfig::default()));
    let serve = keyed_serve(&upstream);
    let before = peak_rss_kib(serve.pid());
    let url = format!("{}/stream?bytes={LARGE}", serve.base_url);
    let (bytes, pieces, events_whole) = rt.block_on(async {
        let mut response = reqwest::Client::new()
            .get(url)
            .bearer_auth(SERVE_KEY)
            .send()
            .await
            .expect("send");
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let (mut bytes, mut pieces, mut tail) = (0u64, 0u64, Vec::new());
        while let Some(piece) = response.chunk().await.expect("a piece") {
            bytes += piece.len() as u64;
            pieces += 1;
            tail = piece[piece.len().saturating_sub(2)..].to_vec();
        }
        (bytes, pieces, tail == b"\n\n")
    });
    let peak = peak_rss_kib(serve.pid());
    eprintln!(
        "serve's peak RSS: {before} KiB at rest, {peak} KiB after relaying {bytes} bytes in {pieces} pieces"
    );
    assert_eq!(bytes, LARGE);
    assert!(events_whole, "the stream did not end on an event's end");
    assert!(
        pieces > 100,
        "the answer came in {pieces} pieces: not streamed"
    );
    assert!(
        peak < PEAK_LIMIT_KIB,
        "serve's peak RSS was {peak} KiB relaying {LARGE} bytes (at rest: {before} KiB)"
    );
    // The line is written once serve has let go of the answer, just after its last piece.
    let mut log = serve.log();
    for _ in 0..100 {
        if log.contains("path=/v1/stream") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        log = serve.log();
    }
    assert!(
        log.contains("path=/v1/stream")
            && log.contains(&format!("bytes={LARGE}"))
            && log.contains("complete=true"),
        "{log}"
    );
}

#[test]
fn with_no_passthrough_serve_answers_404_after_its_key() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let upstream = rt.block_on(FakeServer::start(FakeConfig::default()));
    let serve = Serve::start_with_env(
        &upstream.base_url,
        &["--api-key-env", "PASSTHROUGH_SERVE_KEY", "--no-passthrough"],
        &[("PASSTHROUGH_SERVE_KEY", SERVE_KEY)],
    );
    let url = format!("{}/embeddings", serve.base_url);
    let statuses = rt.block_on(async {
        let mut statuses = Vec::new();
        for key in [None, Some(SERVE_KEY)] {
            let mut request = reqwest::Client::new()
                .post(&url)
                .json(&serde_json::json!({"input": "x"}));
            if let Some(key) = key {
                request = request.bearer_auth(key);
            }
            statuses.push(request.send().await.expect("send").status().as_u16());
        }
        statuses
    });
    assert_eq!(statuses, [401, 404]);
    assert!(upstream.passed().is_empty());
}

#[test]
fn the_config_files_serve_section_can_switch_the_pass_through_off() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let upstream = rt.block_on(FakeServer::start(FakeConfig::default()));
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("tagloop.toml");
    std::fs::write(&path, "[serve]\npassthrough = false\n").expect("write the config");
    let path = path.display().to_string();
    let off = Serve::start(&upstream.base_url, &["--config", &path]);
    let on = Serve::start(&upstream.base_url, &[]);
    let lookup = |serve: &Serve| {
        let url = format!("{}/models/fake-model", serve.base_url);
        rt.block_on(async { reqwest::get(url).await.expect("get").status().as_u16() })
    };
    assert_eq!(lookup(&off), 404, "{}", off.log());
    assert_eq!(lookup(&on), 200, "{}", on.log());
    assert_eq!(upstream.passed().len(), 1);
}
