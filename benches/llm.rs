//! Model-layer speed: the stop scanner's throughput, and the OpenAI client's own cost per streamed
//! turn next to a raw reqwest request + naive SSE read against the same fake server, same run.
//!
//! `cargo bench --bench llm` (figures: BENCHMARKS.md; how to read them: docs/experiments.md,
//! "Model layer").

#[path = "../tests/common/fake_server/mod.rs"]
mod fake_server;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fake_server::{FakeConfig, FakeServer};
use futures::StreamExt;
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::llm::{Message, Model, Prompt, Role, TurnRequest};
use tagloop::llm::{RepeatGuard, StopScanner};

fn stops() -> Vec<String> {
    vec![
        "</action>".into(),
        "<observation>".into(),
        "</final_answer>".into(),
    ]
}

/// Model-like text: tags, code, prose, non-ASCII; no stop string in it.
fn sample_text(len: usize) -> String {
    let unit = "<thought>I need to look at the file first; then décider quoi faire.</thought>\n\
                <action>read_file(path=\"src/main.rs\", start_line=1, end_line=40) if a < b && c > d</act \n";
    let mut s = String::with_capacity(len + unit.len());
    while s.len() < len {
        s.push_str(unit);
    }
    s
}

fn bench_scanner(c: &mut Criterion) {
    let text = sample_text(1 << 20);
    let mut g = c.benchmark_group("stop_scanner");
    g.throughput(Throughput::Bytes(text.len() as u64));
    for chunk in [4usize, 16, 64, 4096] {
        // Pre-split on char boundaries so the loop measures only the scanner.
        let mut pieces: Vec<&str> = Vec::new();
        let mut rest = text.as_str();
        while !rest.is_empty() {
            let mut end = rest.len().min(chunk);
            while !rest.is_char_boundary(end) {
                end += 1;
            }
            pieces.push(&rest[..end]);
            rest = &rest[end..];
        }
        g.bench_function(format!("chunk_{chunk}B"), |b| {
            b.iter(|| {
                let mut s = StopScanner::new(stops());
                let mut out = 0usize;
                for p in &pieces {
                    out += s.push(p).len();
                }
                s.finish();
                black_box(out)
            })
        });
    }
    g.finish();
}

/// 200 tokens of 4 characters, with no repeating pattern (the degeneration guard would cut a
/// turn that repeats itself).
fn turn_text() -> String {
    varied_text(1000).chars().take(800).collect()
}

fn bench_client(c: &mut Criterion) {
    let rt = &*Box::leak(Box::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime"),
    ));
    let fake = FakeConfig {
        default_reply: turn_text(),
        token_chars: 4,
        chunk_bytes: 96,
        ..FakeConfig::default()
    };
    let server = rt.block_on(FakeServer::start(fake));

    let mut cfg = OpenAiConfig::new(&server.base_url, "bench");
    cfg.read_timeout = Duration::from_secs(10);
    let model = Arc::new(OpenAiModel::new(cfg).expect("model"));
    let req = Arc::new(TurnRequest {
        prompt: Prompt::Chat(vec![
            Message::new(Role::System, "sys"),
            Message::new(Role::User, "task"),
        ]),
        stop: stops(),
        max_tokens: Some(1024),
        ..Default::default()
    });
    let raw = reqwest::Client::new();
    let url = Arc::new(format!("{}/chat/completions", server.base_url));
    let raw_body = Arc::new(model.request_body(&req, true, true).expect("body"));
    // Both sides run as spawned tasks on the same runtime (same thread hops).
    let run_raw = {
        let (raw, url, raw_body) = (raw.clone(), url.clone(), raw_body.clone());
        move || {
            let (raw, url, raw_body) = (raw.clone(), url.clone(), raw_body.clone());
            rt.block_on(async move {
                tokio::spawn(async move { raw_turn(&raw, &url, &raw_body).await })
                    .await
                    .expect("join")
            })
        }
    };
    let run_client = {
        let (model, req) = (model.clone(), req.clone());
        move || {
            let (model, req) = (model.clone(), req.clone());
            rt.block_on(async move {
                tokio::spawn(async move {
                    let mut n = 0usize;
                    let r = model
                        .turn(&req, &mut |d: &str| n += d.len())
                        .await
                        .expect("turn");
                    (n, r.text.len())
                })
                .await
                .expect("join")
            })
        }
    };

    // Sanity: both read the same 800 bytes.
    assert_eq!(run_client(), (800, 800));
    assert_eq!(run_raw(), 800);

    // Paired run: alternate raw and client so both see the same machine load (the bench machine
    // is shared); report medians and their ratio.
    let pairs = 300;
    let (mut raw_t, mut cli_t) = (Vec::with_capacity(pairs), Vec::with_capacity(pairs));
    for _ in 0..pairs {
        let t = std::time::Instant::now();
        black_box(run_raw());
        raw_t.push(t.elapsed());
        let t = std::time::Instant::now();
        black_box(run_client());
        cli_t.push(t.elapsed());
    }
    raw_t.sort_unstable();
    cli_t.sort_unstable();
    let (rm, cm) = (raw_t[pairs / 2], cli_t[pairs / 2]);
    eprintln!(
        "paired medians over {pairs} runs: raw {:.3} ms, client {:.3} ms, ratio {:.3}",
        rm.as_secs_f64() * 1e3,
        cm.as_secs_f64() * 1e3,
        cm.as_secs_f64() / rm.as_secs_f64()
    );

    let mut g = c.benchmark_group("streamed_turn_200_tokens");
    g.bench_function("raw_reqwest_naive_sse", |b| b.iter(|| black_box(run_raw())));
    g.bench_function("tagloop_openai_client", |b| {
        b.iter(|| black_box(run_client()))
    });
    g.finish();
}

/// A raw request: POST, then split SSE on blank lines and pull `delta.content` out with serde_json.
async fn raw_turn(client: &reqwest::Client, url: &str, body: &serde_json::Value) -> usize {
    let resp = client.post(url).json(body).send().await.expect("send");
    let mut stream = resp.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    let mut text = String::new();
    while let Some(chunk) = stream.next().await {
        buf.extend_from_slice(&chunk.expect("chunk"));
        while let Some(pos) = buf.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = buf.drain(..pos + 2).collect();
            let line = String::from_utf8_lossy(&event);
            let Some(data) = line.trim().strip_prefix("data: ") else {
                continue;
            };
            if data == "[DONE]" {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(data).expect("json");
            if let Some(s) = v["choices"][0]["delta"]["content"].as_str() {
                text.push_str(s);
            }
        }
    }
    text.len()
}

/// Model-like text that never repeats itself: varied words and numbers, as a long turn.
fn varied_text(len: usize) -> String {
    let words = [
        "file", "line", "read", "the", "config", "port", "answer", "search", "notes", "value",
        "count", "first", "check", "tool", "result", "next",
    ];
    let mut x: u64 = 7;
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as usize
    };
    let mut s = String::with_capacity(len + 128);
    while s.len() < len {
        let n = 3 + next() % 9;
        for _ in 0..n {
            s.push_str(words[next() % words.len()]);
            s.push(' ');
        }
        s.push_str(&format!("{}.\n", next() % 1000));
    }
    s
}

/// The degeneration guard's cost on a turn that never repeats (the common case): 1 MiB in
/// 16-byte deltas, checked after every delta as the client does.
fn bench_guard(c: &mut Criterion) {
    let text = varied_text(1 << 20);
    let mut g = c.benchmark_group("repeat_guard");
    g.throughput(Throughput::Bytes(text.len() as u64));
    let run = || {
        let mut guard = RepeatGuard::default();
        let mut grown = String::with_capacity(text.len());
        let mut found = 0usize;
        for piece in text.as_bytes().chunks(16) {
            // ASCII text: every 16-byte piece is a str.
            grown.push_str(std::str::from_utf8(piece).unwrap_or_default());
            found += usize::from(guard.check(&grown).is_some());
        }
        found
    };
    assert_eq!(run(), 0, "the sample text must not look like a loop");
    g.bench_function("chunk_16B", |b| b.iter(|| black_box(run())));
    // An agent's constrained turn with every guard on: strict until `<action>`, counts cut; the
    // same text as a call's arguments (after `<action>`), where the counting guard reads each
    // line.
    let req = TurnRequest {
        strict_repeats_until: vec!["<action>".into()],
        cut_counting: true,
        ..Default::default()
    };
    let call = format!("<action>write_file(path=\"a.txt\", content=\"\"\"{text}");
    let constrained = || {
        let mut guard = RepeatGuard::for_request(&req, true).unwrap_or_default();
        let mut grown = String::with_capacity(call.len());
        let mut found = 0usize;
        for piece in call.as_bytes().chunks(16) {
            grown.push_str(std::str::from_utf8(piece).unwrap_or_default());
            found += usize::from(guard.check(&grown).is_some());
        }
        found
    };
    assert_eq!(
        constrained(),
        0,
        "the sample call must not look like a loop"
    );
    g.bench_function("chunk_16B_agent_call", |b| {
        b.iter(|| black_box(constrained()))
    });
    g.finish();
}

criterion_group!(benches, bench_scanner, bench_client, bench_guard);
criterion_main!(benches);
