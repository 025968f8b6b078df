//! Context fitting (issue 23) through the real HTTP client: an `OpenAiModel` against the fake
//! llama.cpp server, which states its window in `/props`, counts tokens at `/tokenize`, and
//! refuses with llama.cpp's 400 any request over its window (`enforce_window`). An agent with the
//! workspace toolkit reads several 3–6 KB files one after another, then answers, on chat and
//! completions, streamed and whole.
//!
//! The window is chosen from the fake's own count of the requests of a run that needed no
//! fitting, so each test knows which request is the first that would not have fit.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::fake_server::{FakeConfig, FakeServer, RecordedRequest};
use serde_json::{Value, json};

use tagloop::agent::context::FINAL_NOTE;
use tagloop::agent::{Agent, AgentConfig, ContextPolicy, Event, EventSink, RunOptions, Status};
use tagloop::llm::Api;
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::tools::{ToolkitOptions, Workspace, toolkit};

/// The turn budget every request asks for.
const BUDGET: u32 = 200;

/// The files read, in order; 55 to 100 numbered lines of about 50 bytes (3–6 KB).
const FILES: [(&str, usize); 5] = [
    ("notes/april.md", 70),
    ("notes/may.md", 100),
    ("notes/june.md", 55),
    ("notes/july.md", 90),
    ("notes/august.md", 80),
];

fn file_text(path: &str, lines: usize) -> String {
    (1..=lines)
        .map(|i| format!("{path} line {i:03}: the figures of the month, in words.\n"))
        .collect()
}

/// A workspace holding [`FILES`].
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("notes")).unwrap();
    for (path, lines) in FILES {
        let text = file_text(path, lines);
        assert!(
            (3_000..=6_500).contains(&text.len()),
            "{path}: {}",
            text.len()
        );
        std::fs::write(dir.path().join(path), text).unwrap();
    }
    // About 300 bytes: an observation shorter than the shortest form fitting cuts one to.
    std::fs::write(
        dir.path().join("notes/short.md"),
        file_text("notes/short.md", 5),
    )
    .unwrap();
    dir
}

/// Read the first `n` files, one a turn, then answer.
fn turns(n: usize) -> Vec<String> {
    let mut t: Vec<String> = FILES[..n]
        .iter()
        .map(|(path, _)| {
            format!("<thought>Next: {path}.</thought>\n<action>read_file(path=\"{path}\")</action>")
        })
        .collect();
    t.push("<thought>All read.</thought>\n<final_answer>the summer was warm</final_answer>".into());
    t
}

/// The fake llama.cpp server with this window, its tokenizer, and the window enforced.
fn llama(window: u64, turns: &[String]) -> FakeConfig {
    FakeConfig {
        props: true,
        props_n_ctx: window,
        tokenizer: true,
        enforce_window: true,
        ..FakeConfig::turns(turns.iter().cloned())
    }
}

/// What a run gave, and the server it ran against.
struct Ran {
    outcome: tagloop::agent::Outcome,
    events: Vec<Event>,
    server: FakeServer,
}

impl Ran {
    fn fittings(&self) -> Vec<&Event> {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::ContextFitted { .. }))
            .collect()
    }

    fn requests(&self) -> Vec<RecordedRequest> {
        self.server.requests()
    }

    /// The fake's count of every completion request and its budget.
    fn sizes(&self) -> Vec<u64> {
        self.requests()
            .iter()
            .map(|r| FakeServer::prompt_tokens(&r.body))
            .collect()
    }
}

async fn run_with(
    fake: FakeConfig,
    api: Api,
    stream: bool,
    config: impl FnOnce(&mut AgentConfig),
) -> Ran {
    let ws = workspace();
    let server = FakeServer::start(fake).await;
    let mut mc = OpenAiConfig::new(&server.base_url, "fake-model");
    mc.api = api;
    mc.stream = stream;
    mc.read_timeout = Duration::from_secs(10);
    mc.turn_timeout = Some(Duration::from_secs(30));
    let model = Arc::new(OpenAiModel::new(mc).expect("client builds"));
    let mut cfg = AgentConfig {
        api,
        max_tokens: Some(BUDGET),
        max_steps: 20,
        ..AgentConfig::default()
    };
    // These tests size their windows from a run with room to spare: the same system prompt at
    // every window (the compact one is tested in tests/cli_context.rs).
    cfg.context.compact_prompt_below = 0;
    config(&mut cfg);
    let tools = toolkit(
        Arc::new(Workspace::new(ws.path()).unwrap()),
        ToolkitOptions::default(),
    );
    let agent = Agent::builder(model)
        .tools(tools)
        .config(cfg)
        .build()
        .expect("agent builds");
    let store = Arc::new(Mutex::new(Vec::new()));
    let s = store.clone();
    let sink: EventSink = Arc::new(move |e: &Event| s.lock().unwrap().push(e.clone()));
    let outcome = agent
        .run_with(
            "Read the notes of each month and say how the summer was.",
            RunOptions {
                events: Some(sink),
                ..RunOptions::default()
            },
        )
        .await;
    let events = store.lock().unwrap().clone();
    Ran {
        outcome,
        events,
        server,
    }
}

async fn run(fake: FakeConfig, api: Api, stream: bool) -> Ran {
    run_with(fake, api, stream, |_| {}).await
}

/// The text of a request's prompt: its messages' contents, or its completions text.
fn prompt_of(r: &RecordedRequest) -> String {
    match r.body["prompt"].as_str() {
        Some(p) => p.to_owned(),
        None => r.body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["content"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// The prompt a request carries (`messages` or `prompt`), for comparing requests.
fn prompt_json(r: &RecordedRequest) -> Value {
    match r.body.get("prompt") {
        Some(p) => p.clone(),
        None => r.body["messages"].clone(),
    }
}

/// How many tokenizer requests (`/apply-template`, `/tokenize`) came before each completion
/// request, since the one before it.
fn counts_before_each(server: &FakeServer) -> Vec<usize> {
    let mut out = Vec::new();
    let mut since = 0;
    for path in server.sequence() {
        if path.starts_with("/v1/") {
            out.push(since);
            since = 0;
        } else if path == "/tokenize" || path == "/apply-template" {
            since += 1;
        }
    }
    out
}

fn margin() -> u64 {
    u64::from(ContextPolicy::default().margin_tokens)
}

/// The whole issue-23 story for one API and transport: far from the window nothing is fitted
/// and nothing counted, and no request is added; with a window in which request `k` just fits,
/// fitting starts exactly at request `k + 1`, and no request is refused.
async fn fitting_starts_exactly_where_the_window_ends(api: Api, stream: bool) {
    let what = format!("{api:?} stream={stream}");
    let t = turns(FILES.len());

    // A big window: the requests are exactly the turns, plus the one probe (`/props`).
    let free = run(llama(1_000_000, &t), api, stream).await;
    assert_eq!(
        free.outcome.status,
        Status::Ok,
        "{what}: {:?}",
        free.outcome.error
    );
    assert_eq!(
        free.outcome.final_answer,
        Some(json!("the summer was warm"))
    );
    assert!(free.fittings().is_empty(), "{what}");
    assert_eq!(
        free.server.request_count(),
        t.len(),
        "{what}: one request a turn"
    );
    assert_eq!(free.server.probes(), 1, "{what}: one probe");
    assert!(
        free.server.root_requests().is_empty(),
        "{what}: the tokenizer is never asked far from the window"
    );
    let sizes = free.sizes();

    // Request `k` fits exactly: prompt, budget and margin make the window.
    let k = 2;
    let window = sizes[k] + u64::from(BUDGET) + margin();
    let fitted = run(llama(window, &t), api, stream).await;
    let o = &fitted.outcome;
    assert_eq!(o.status, Status::Ok, "{what}: {:?}", o.error);
    assert_eq!(o.final_answer, Some(json!("the summer was warm")));
    assert_eq!(fitted.server.refused(), 0, "{what}: no request refused");
    let requests = fitted.requests();
    assert_eq!(
        requests.len(),
        t.len(),
        "{what}: no request added or retried"
    );
    let free_requests = free.requests();
    for i in 0..=k {
        assert_eq!(
            prompt_json(&requests[i]),
            prompt_json(&free_requests[i]),
            "{what}: request {i} is sent whole"
        );
    }
    for (i, r) in requests.iter().enumerate() {
        let max = r.body["max_tokens"].as_u64().unwrap_or(0);
        let n = FakeServer::prompt_tokens(&r.body);
        assert!(
            n + max <= window,
            "{what}: request {i}: {n} + {max} > {window}"
        );
    }

    // The first fitting is that of request k + 1 (step k + 2), counted by the server.
    let Some(Event::ContextFitted {
        step,
        window: w,
        tokens_before,
        tokens_after,
        counted,
        observations_cut,
        after_refusal,
        ..
    }) = fitted.fittings().first().copied()
    else {
        panic!("{what}: no fitting")
    };
    assert_eq!(*step as usize, k + 2, "{what}");
    assert_eq!(*w, window);
    assert_eq!(*tokens_before, sizes[k + 1], "{what}: the server's count");
    assert!(*counted, "{what}");
    assert!(*observations_cut > 0, "{what}");
    assert!(!after_refusal);
    assert_eq!(
        *tokens_after,
        FakeServer::prompt_tokens(&requests[k + 1].body),
        "{what}: the count of what was sent"
    );
    // Every later request is fitted too (the history only grows).
    let steps: Vec<u32> = fitted
        .fittings()
        .iter()
        .filter_map(|e| match e {
            Event::ContextFitted { step, .. } => Some(*step),
            _ => None,
        })
        .collect();
    let want: Vec<u32> = (k as u32 + 2..=t.len() as u32).collect();
    assert_eq!(steps, want, "{what}");

    // The observation cut names the call that shows the rest.
    let marked = requests.iter().any(|r| {
        let text = prompt_of(r);
        text.contains("cut here to fit the context window: lines ")
            && text.contains(r#"To see them: read_file(path="notes/april.md", start_line="#)
    });
    assert!(marked, "{what}: a cut marker naming read_file");
    // The run's history keeps every observation whole.
    for (path, lines) in FILES {
        let last = format!("{path} line {lines:03}");
        assert!(
            o.messages.iter().any(|m| m.content.contains(&last)),
            "{what}: {path} whole in the history"
        );
    }

    // The tokenizer is asked only near the window: never before a request far from it (half
    // the window), and before the first fitted request.
    let counts = counts_before_each(&fitted.server);
    assert_eq!(counts.len(), requests.len());
    let mut far = 0;
    for (i, n) in sizes.iter().enumerate() {
        if (n + u64::from(BUDGET) + margin()) * 2 <= window {
            far += 1;
            assert_eq!(counts[i], 0, "{what}: request {i} is far from the window");
        }
    }
    assert!(far > 0, "{what}: a request far from the window");
    assert!(counts[k + 1] > 0, "{what}: counted before fitting");
}

#[tokio::test]
async fn fitting_over_http_chat_streamed() {
    fitting_starts_exactly_where_the_window_ends(Api::Chat, true).await;
}

#[tokio::test]
async fn fitting_over_http_chat_whole() {
    fitting_starts_exactly_where_the_window_ends(Api::Chat, false).await;
}

#[tokio::test]
async fn fitting_over_http_completions_streamed() {
    fitting_starts_exactly_where_the_window_ends(Api::Completions, true).await;
}

#[tokio::test]
async fn fitting_over_http_completions_whole() {
    fitting_starts_exactly_where_the_window_ends(Api::Completions, false).await;
}

/// Room for a final answer (128 tokens) but not for a turn (256), with nothing left to cut
/// (the one observation is short): one final-answer-only turn, then `context_exceeded`, and no
/// request refused.
#[tokio::test]
async fn a_nearly_full_window_gets_one_final_only_turn_over_http() {
    for api in [Api::Chat, Api::Completions] {
        let t = [
            "<action>read_file(path=\"notes/short.md\")</action>".to_owned(),
            "<final_answer>what I know</final_answer>".to_owned(),
        ];
        let free = run_with(llama(1_000_000, &t), api, true, |c| {
            c.max_tokens = Some(1000)
        })
        .await;
        let second = free.sizes()[1];
        let window = second + margin() + 200;
        let ran = run_with(llama(window, &t), api, true, |c| c.max_tokens = Some(1000)).await;
        let o = &ran.outcome;
        assert_eq!(o.status, Status::ContextExceeded, "{api:?}: {:?}", o.error);
        assert_eq!(o.final_answer, Some(json!("what I know")), "{api:?}");
        assert_eq!(ran.server.refused(), 0, "{api:?}");
        assert!(ran.events.contains(&Event::TurnStarted {
            step: 2,
            final_only: true
        }));
        let last = ran.requests().last().cloned().unwrap();
        assert!(prompt_of(&last).contains(FINAL_NOTE), "{api:?}");
        let max = last.body["max_tokens"].as_u64().unwrap();
        assert!((128..256).contains(&max), "{api:?}: {max}");
    }
}

/// A window smaller than the system prompt: the run ends `context_exceeded` without sending
/// anything the server would refuse.
#[tokio::test]
async fn a_tiny_window_ends_context_exceeded_without_a_request() {
    for api in [Api::Chat, Api::Completions] {
        for stream in [true, false] {
            let ran = run(llama(300, &turns(2)), api, stream).await;
            let o = &ran.outcome;
            assert_eq!(o.status, Status::ContextExceeded, "{api:?}: {:?}", o.error);
            assert!(
                o.error
                    .as_deref()
                    .unwrap_or_default()
                    .contains("context window of 300 tokens is full")
            );
            assert_eq!(ran.server.request_count(), 0);
            assert_eq!(ran.server.refused(), 0);
        }
    }
}

/// The tokenizer counts 20 % short (an estimate that is off): the server refuses the first
/// request that needed fitting, the loop fits it again to the window the server named with a
/// larger margin, and the run goes on and ends `ok`: one refusal, one retry.
#[tokio::test]
async fn a_context_400_over_http_is_retried_once() {
    for api in [Api::Chat, Api::Completions] {
        for stream in [true, false] {
            let what = format!("{api:?} stream={stream}");
            let t = turns(FILES.len());
            let free = run(llama(1_000_000, &t), api, stream).await;
            let sizes = free.sizes();
            let window = sizes[3] + u64::from(BUDGET) + margin();
            let fake = FakeConfig {
                tokenize_percent: 80,
                ..llama(window, &t)
            };
            let ran = run(fake, api, stream).await;
            let o = &ran.outcome;
            assert_eq!(o.status, Status::Ok, "{what}: {:?}", o.error);
            assert_eq!(ran.server.refused(), 1, "{what}: one refusal");
            let retries = ran
                .fittings()
                .into_iter()
                .filter(|e| {
                    matches!(
                        e,
                        Event::ContextFitted {
                            after_refusal: true,
                            ..
                        }
                    )
                })
                .count();
            assert_eq!(retries, 1, "{what}: one retry");
            assert_eq!(
                ran.server.request_count(),
                t.len() + 1,
                "{what}: the turns and the one retry"
            );
        }
    }
}
