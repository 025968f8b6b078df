//! Context fitting (issue 23): a scripted model behind a test model that declares a context
//! window, counts tokens as bytes / 4 (as the scripted model reports them), refuses like
//! llama.cpp a prompt that does not fit, and records every request.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use tagloop::agent::context::FINAL_NOTE;
use tagloop::agent::{
    Agent, AgentConfig, ContextPolicy, Event, EventSink, Resume, RunOptions, Status,
};
use tagloop::llm::ScriptedModel;
use tagloop::llm::{Api, DeltaSink, LlmError, Model, Prompt, TurnRequest, TurnResult};
use tagloop::tools::{Registry, tool_fn};

/// The test model's token count: bytes / 4 of the text the model reads (the scripted model
/// reports `prompt_tokens` the same way).
fn tokens(p: &Prompt) -> u64 {
    let bytes: usize = match p {
        Prompt::Chat(m) => m.iter().map(|m| m.content.len()).sum(),
        Prompt::Text(t) => t.len(),
    };
    (bytes as u64).div_ceil(4)
}

/// One request the model received.
#[derive(Debug, Clone)]
struct Asked {
    prompt: Prompt,
    max_tokens: Option<u32>,
}

/// A model with a window: answers from a script, refuses (HTTP 400, llama.cpp's words) a prompt
/// whose tokens and budget exceed the window, and can refuse the first request whatever it is.
struct Windowed {
    inner: Arc<ScriptedModel>,
    /// What `context_window` says (may differ from the window it enforces).
    declared: Option<u64>,
    /// The window it enforces.
    enforced: u64,
    /// Whether it has a tokenizer (`count_tokens` answers).
    tokenizer: bool,
    counts: AtomicU32,
    /// Refuse this many requests as too long before answering, whatever their size.
    refuse_first: AtomicU32,
    asked: Mutex<Vec<Asked>>,
}

impl Windowed {
    fn new(turns: &[&str], window: Option<u64>) -> Arc<Self> {
        Arc::new(Windowed {
            inner: common::script::model(turns),
            declared: window,
            enforced: window.unwrap_or(u64::MAX),
            tokenizer: true,
            counts: AtomicU32::new(0),
            refuse_first: AtomicU32::new(0),
            asked: Mutex::new(Vec::new()),
        })
    }

    fn asked(&self) -> Vec<Asked> {
        self.asked.lock().unwrap().clone()
    }
}

fn too_long(requested: u64, window: u64) -> LlmError {
    LlmError::Http {
        status: 400,
        url: "http://fake".into(),
        message: format!(
            "request ({requested} tokens) exceeds the available context size ({window} tokens), try increasing it"
        ),
    }
}

impl Model for Windowed {
    fn turn<'a>(
        &'a self,
        request: &'a TurnRequest,
        on_delta: DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<TurnResult, LlmError>> {
        Box::pin(async move {
            self.asked.lock().unwrap().push(Asked {
                prompt: request.prompt.clone(),
                max_tokens: request.max_tokens,
            });
            let n = tokens(&request.prompt);
            let refuse = self
                .refuse_first
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |r| r.checked_sub(1))
                .is_ok();
            if refuse || n + u64::from(request.max_tokens.unwrap_or(0)) > self.enforced {
                return Err(too_long(n, self.enforced));
            }
            self.inner.turn(request, on_delta).await
        })
    }

    fn supports_prefill(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        "windowed".into()
    }

    fn context_window(&self) -> Option<u64> {
        self.declared
    }

    fn count_tokens<'a>(
        &'a self,
        prompt: &'a Prompt,
    ) -> BoxFuture<'a, Result<Option<u64>, LlmError>> {
        Box::pin(async move {
            if !self.tokenizer {
                return Ok(None);
            }
            self.counts.fetch_add(1, Ordering::SeqCst);
            Ok(Some(tokens(prompt)))
        })
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct ReadArgs {
    /// The file.
    path: String,
    /// The first line.
    start_line: Option<u64>,
}

/// 100 numbered lines of about 40 bytes: 4 KB.
fn file_text(path: &str) -> String {
    // `small…` (one line) and `short…` (about 330 bytes) give observations too short for
    // fitting to cut; `medium…` (about 1 KB) is cut, as the last resort, only to let a turn fit.
    let lines = match path {
        p if p.starts_with("small") => 1,
        p if p.starts_with("short") => 8,
        p if p.starts_with("medium") => 25,
        _ => 100,
    };
    (1..=lines)
        .map(|i| format!("{path} line {i:03}: some words of the file"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn tools() -> Registry {
    let mut r = Registry::new();
    r.add(Arc::new(tool_fn(
        "read_file",
        "Read a file.",
        |a: ReadArgs| async move {
            let _ = a.start_line;
            Ok(file_text(&a.path))
        },
    )));
    r
}

/// `n` reads of 4 KB files, then a final answer.
fn turns(n: usize) -> Vec<String> {
    let mut t: Vec<String> = (1..=n)
        .map(|i| {
            format!(
                "<thought>Read file {i}.</thought>\n<action>read_file(path=\"f{i}.txt\")</action>"
            )
        })
        .collect();
    t.push("<thought>Done.</thought>\n<final_answer>all read</final_answer>".into());
    t
}

const BUDGET: u32 = 200;

fn agent(model: Arc<dyn Model>, api: Api, f: impl FnOnce(&mut AgentConfig)) -> Agent {
    let mut config = AgentConfig {
        api,
        max_tokens: Some(BUDGET),
        max_steps: 20,
        ..AgentConfig::default()
    };
    // These tests size their windows from a run with room to spare: the same system prompt at
    // every window (the compact one is tested in tests/cli_context.rs).
    config.context.compact_prompt_below = 0;
    f(&mut config);
    Agent::builder(model)
        .tools(tools())
        .config(config)
        .build()
        .expect("agent builds")
}

fn collect() -> (EventSink, Arc<Mutex<Vec<Event>>>) {
    let store = Arc::new(Mutex::new(Vec::new()));
    let s = store.clone();
    (
        Arc::new(move |e: &Event| s.lock().unwrap().push(e.clone())),
        store,
    )
}

/// Run `n` reads against a model with `window`; the outcome, the events and the model.
async fn run(
    n: usize,
    window: Option<u64>,
    api: Api,
    f: impl FnOnce(&mut AgentConfig),
) -> (tagloop::agent::Outcome, Vec<Event>, Arc<Windowed>) {
    let t = turns(n);
    let refs: Vec<&str> = t.iter().map(String::as_str).collect();
    let model = Windowed::new(&refs, window);
    let (sink, events) = collect();
    let o = agent(model.clone(), api, f)
        .run_with(
            "read the files",
            RunOptions {
                events: Some(sink),
                ..Default::default()
            },
        )
        .await;
    let events = events.lock().unwrap().clone();
    (o, events, model)
}

fn fittings(events: &[Event]) -> Vec<&Event> {
    events
        .iter()
        .filter(|e| matches!(e, Event::ContextFitted { .. }))
        .collect()
}

fn text_of(p: &Prompt) -> String {
    match p {
        Prompt::Chat(m) => m
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        Prompt::Text(t) => t.clone(),
    }
}

#[tokio::test]
async fn far_below_the_window_nothing_is_fitted_and_nothing_counted() {
    let (o, events, model) = run(4, Some(1_000_000), Api::Chat, |_| {}).await;
    assert_eq!(o.status, Status::Ok);
    assert!(fittings(&events).is_empty());
    assert_eq!(
        model.counts.load(Ordering::SeqCst),
        0,
        "no count_tokens request"
    );
    assert!(model.asked().iter().all(|a| a.max_tokens == Some(BUDGET)));
}

#[tokio::test]
async fn without_a_window_nothing_is_fitted() {
    let (o, events, model) = run(6, None, Api::Chat, |_| {}).await;
    assert_eq!(o.status, Status::Ok);
    assert!(fittings(&events).is_empty());
    assert_eq!(model.counts.load(Ordering::SeqCst), 0);
}

/// The window is set so that request `k` fits exactly (its tokens + budget + margin): requests
/// up to `k` go as they are, and the first larger one is fitted.
async fn fitting_starts_exactly_at_the_window(api: Api) {
    let (_, _, free) = run(6, Some(1_000_000), api, |_| {}).await;
    let sizes: Vec<u64> = free.asked().iter().map(|a| tokens(&a.prompt)).collect();
    let margin = u64::from(ContextPolicy::default().margin_tokens);
    let k = 3;
    let window = sizes[k] + u64::from(BUDGET) + margin;
    let (o, events, model) = run(6, Some(window), api, |_| {}).await;
    assert_eq!(o.status, Status::Ok, "{:?}", o.error);
    let asked = model.asked();
    for (i, a) in asked.iter().enumerate().take(k + 1) {
        assert_eq!(tokens(&a.prompt), sizes[i], "request {i} was sent whole");
    }
    let fitted = fittings(&events);
    let Some(Event::ContextFitted {
        step,
        tokens_before,
        tokens_after,
        counted,
        ..
    }) = fitted.first()
    else {
        panic!("no fitting")
    };
    assert_eq!(
        *step as usize,
        k + 2,
        "the first request past the window is fitted"
    );
    assert_eq!(*tokens_before, sizes[k + 1]);
    assert!(*counted, "near the window the server's tokenizer is asked");
    for a in &asked[k + 1..] {
        let n = tokens(&a.prompt) + u64::from(a.max_tokens.unwrap_or(0));
        assert!(
            n + margin <= window,
            "every request fits: {n} + {margin} > {window}"
        );
    }
    assert_eq!(tokens(&asked[k + 1].prompt), *tokens_after);
    // The run's own history is whole: every observation at full length.
    assert_eq!(o.messages.len(), 2 + 2 * 7 - 1);
    assert!(
        o.messages
            .iter()
            .filter(|m| m.content.starts_with("<observation>"))
            .all(|m| m.content.contains("line 100"))
    );
}

#[tokio::test]
async fn fitting_starts_exactly_at_the_window_chat() {
    fitting_starts_exactly_at_the_window(Api::Chat).await;
}

#[tokio::test]
async fn fitting_starts_exactly_at_the_window_completions() {
    fitting_starts_exactly_at_the_window(Api::Completions).await;
}

/// The prompt of a late request: old observations cut with the marker, then old steps
/// summarised; system prompt, task and the last step whole.
#[tokio::test]
async fn observations_are_cut_then_steps_summarised_and_the_rest_kept_whole() {
    for api in [Api::Chat, Api::Completions] {
        let (o, events, model) = run(8, Some(3_000), api, |_| {}).await;
        assert_eq!(o.status, Status::Ok, "{api:?}: {:?}", o.error);
        let last = model.asked().last().unwrap().prompt.clone();
        let text = text_of(&last);
        // The system prompt and the task are sent whole: in chat the first two messages, in
        // completions the text of the first request (nothing but them) begins every later one.
        match (&last, &model.asked()[0].prompt) {
            (Prompt::Chat(m), _) => assert_eq!(m[..2], o.messages[..2]),
            (Prompt::Text(t), Prompt::Text(first)) => assert!(t.starts_with(first.as_str())),
            _ => panic!("prompt shapes differ"),
        }
        // The last step (read of f8, its observation) is whole.
        assert!(text.contains(&file_text("f8.txt")), "{api:?}");
        assert!(
            text.contains("left out to fit the context window; call read_file again"),
            "{api:?}: a step summarised"
        );
        assert!(text.contains(r#"<action>read_file(path="f1.txt")</action>"#));
        let cut = fittings(&events).iter().any(
            |e| matches!(e, Event::ContextFitted { observations_cut, .. } if *observations_cut > 0),
        );
        let summarised = fittings(&events).iter().any(
            |e| matches!(e, Event::ContextFitted { steps_summarised, .. } if *steps_summarised > 0),
        );
        assert!(cut && summarised, "{api:?}");
        // An earlier request shows the marker of a cut observation.
        let marked = model.asked().iter().any(|a| {
            let t = text_of(&a.prompt);
            t.contains("cut here to fit the context window: lines ")
                && t.contains(r#"To see them: read_file(path="f1.txt", start_line="#)
        });
        assert!(marked, "{api:?}");
    }
}

#[tokio::test]
async fn the_turn_budget_shrinks_when_the_history_cannot() {
    // Small observations: nothing to cut; the budget shrinks to what is left, above the floor.
    let t = [
        "<action>read_file(path=\"small.txt\")</action>",
        "<final_answer>ok</final_answer>",
    ];
    let first = Windowed::new(&t, Some(1_000_000));
    agent(first.clone(), Api::Chat, |_| {}).run("x").await;
    let second_size = tokens(&first.asked()[1].prompt);
    let margin = u64::from(ContextPolicy::default().margin_tokens);
    let model = Windowed::new(&t, Some(second_size + margin + 300));
    let (sink, events) = collect();
    let o = agent(model.clone(), Api::Chat, |c| c.max_tokens = Some(1000))
        .run_with(
            "x",
            RunOptions {
                events: Some(sink),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(o.status, Status::Ok, "{:?}", o.error);
    assert_eq!(model.asked()[1].max_tokens, Some(300));
    let events = events.lock().unwrap();
    assert!(fittings(&events).iter().any(|e| matches!(
        e,
        Event::ContextFitted {
            max_tokens: Some(300),
            observations_cut: 0,
            steps_summarised: 0,
            ..
        }
    )));
}

#[tokio::test]
async fn below_the_floor_one_final_only_turn_then_context_exceeded() {
    let t = [
        // Too short to cut: nothing is left to give up but the turn's budget.
        "<action>read_file(path=\"short.txt\")</action>",
        "<final_answer>what I know</final_answer>",
    ];
    let probe = Windowed::new(&t, Some(1_000_000));
    agent(probe.clone(), Api::Chat, |_| {}).run("x").await;
    let second = tokens(&probe.asked()[1].prompt);
    let p = ContextPolicy::default();
    // Room for the final turn (128) but not for an ordinary one (256); the note costs a few.
    let window = second + u64::from(p.margin_tokens) + 200;
    let model = Windowed::new(&t, Some(window));
    let (sink, events) = collect();
    let o = agent(model.clone(), Api::Chat, |c| c.max_tokens = Some(1000))
        .run_with(
            "x",
            RunOptions {
                events: Some(sink),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(o.status, Status::ContextExceeded);
    assert_eq!(o.final_answer, Some(json!("what I know")));
    let events = events.lock().unwrap();
    assert!(events.contains(&Event::TurnStarted {
        step: 2,
        final_only: true
    }));
    assert!(text_of(&model.asked()[1].prompt).contains(FINAL_NOTE));
    assert!(
        !o.messages.iter().any(|m| m.content.contains(FINAL_NOTE)),
        "the note is not in the history"
    );
}

#[tokio::test]
async fn a_window_smaller_than_the_system_prompt_ends_without_a_request() {
    let (o, _, model) = run(1, Some(300), Api::Chat, |_| {}).await;
    assert_eq!(o.status, Status::ContextExceeded);
    assert!(
        o.error
            .unwrap()
            .contains("context window of 300 tokens is full")
    );
    assert!(model.asked().is_empty());
}

#[tokio::test]
async fn fitting_off_sends_everything() {
    let (o, events, _) = run(6, Some(3_000), Api::Chat, |c| {
        c.context = ContextPolicy::off();
    })
    .await;
    assert_eq!(
        o.status,
        Status::Error,
        "the server refuses: today's behaviour"
    );
    assert!(fittings(&events).is_empty());
}

#[tokio::test]
async fn a_context_400_is_retried_once_fitted_harder() {
    // The model states no window; the server names its own when it refuses.
    let t = turns(6);
    let refs: Vec<&str> = t.iter().map(String::as_str).collect();
    let model = Arc::new(Windowed {
        declared: None,
        enforced: 4_000,
        ..Arc::into_inner(Windowed::new(&refs, None)).unwrap()
    });
    let (sink, events) = collect();
    let o = agent(model.clone(), Api::Chat, |_| {})
        .run_with(
            "x",
            RunOptions {
                events: Some(sink),
                ..Default::default()
            },
        )
        .await;
    let events = events.lock().unwrap();
    let retries: Vec<_> = fittings(&events)
        .into_iter()
        .filter(|e| {
            matches!(
                e,
                Event::ContextFitted {
                    after_refusal: true,
                    window: 4_000,
                    ..
                }
            )
        })
        .collect();
    assert!(!retries.is_empty(), "a fitting after the refusal");
    assert_eq!(o.status, Status::Ok, "{:?}", o.error);
}

#[tokio::test]
async fn a_second_context_400_ends_the_run_context_exceeded() {
    let (o, _, model) = {
        let t = turns(2);
        let refs: Vec<&str> = t.iter().map(String::as_str).collect();
        let model = Windowed::new(&refs, Some(100_000));
        model.refuse_first.store(10, Ordering::SeqCst);
        let o = agent(model.clone(), Api::Chat, |_| {}).run("x").await;
        (o, (), model)
    };
    assert_eq!(o.status, Status::ContextExceeded);
    assert_eq!(model.asked().len(), 2, "asked once more, then no more");
    assert!(o.error.unwrap().contains("again, after fitting"));
}

#[tokio::test]
async fn the_event_is_in_the_events_json_and_the_transcript_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let t = turns(8);
    let refs: Vec<&str> = t.iter().map(String::as_str).collect();
    let model = Windowed::new(&refs, Some(3_000));
    let (sink, events) = collect();
    let a = agent(model.clone(), Api::Chat, |_| {});
    let o = a
        .run_with(
            "read the files",
            RunOptions {
                events: Some(sink),
                transcript: Some(tagloop::session::Transcript::create(dir.path(), "s").unwrap()),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(o.status, Status::Ok);
    let first = fittings(&events.lock().unwrap())[0].clone();
    let json = serde_json::to_value(&first).unwrap();
    assert_eq!(json["type"], "context_fitted");
    for key in [
        "step",
        "window",
        "tokens_before",
        "tokens_after",
        "counted",
        "observations_cut",
        "steps_summarised",
        "max_tokens",
        "final_only",
        "after_refusal",
    ] {
        assert!(json.get(key).is_some(), "{key} in {json}");
    }
    let text = std::fs::read_to_string(dir.path().join("s.jsonl")).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        records.iter().any(|r| r == &json),
        "the same record in the transcript"
    );
    // The transcript's messages are the full history.
    let resume = Resume::from_records(&records).unwrap();
    assert_eq!(resume.messages, o.messages);

    // A continued run starts from the full record and fits it again.
    let mut resume = resume;
    resume.message = Some("And once more?".into());
    let more = Windowed::new(&["<final_answer>yes</final_answer>"], Some(3_000));
    let (sink, events) = collect();
    let o2 = agent(more.clone(), Api::Chat, |_| {})
        .run_with(
            "read the files",
            RunOptions {
                events: Some(sink),
                resume: Some(resume),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(o2.status, Status::Ok, "{:?}", o2.error);
    assert!(
        !fittings(&events.lock().unwrap()).is_empty(),
        "fitted again"
    );
    assert_eq!(o2.messages[..o.messages.len()], o.messages[..]);
    assert!(text_of(&more.asked()[0].prompt).contains("And once more?"));
}
