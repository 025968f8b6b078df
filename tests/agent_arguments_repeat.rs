//! A constrained call whose argument says one sentence again and again (issue 31 item 5:
//! SmolLM2's `write_file` content `This is a note from the user. This is a note from the user. …`
//! until the ordinary guard cut it after 150–210 tokens) is cut by the strict guard after three
//! copies and not run, when the run was never given that sentence; a call that writes out what
//! the task asked for, copies and all, runs. Through the real HTTP client against the fake
//! llama.cpp, which sends the grammar.

mod common;

use std::sync::Arc;

use common::agent::{agent, collect_events, with_events};
use common::fake_server::{FakeConfig, FakeServer};
use pretty_assertions::assert_eq;

use tagloop::agent::{Event, Outcome, Status};
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::llm::{Api, NoticeKind};

const SENTENCE: &str = "This is a note from the user. ";
const ANSWER: &str = "<thought>Done.</thought>\n<final_answer>done</final_answer>";

/// Six copies, 180 bytes: far under the ordinary guard's 512.
fn call() -> String {
    format!(
        "<thought>I echo it.</thought>\n<action>echo(text=\"{}\")</action>",
        SENTENCE.repeat(6)
    )
}

/// A run of `task` against the fake llama.cpp (its `/props` makes every turn constrained), the
/// fake replying `turns`; the outcome, the server and the notices' kinds.
async fn run(task: &str, turns: Vec<String>) -> (Outcome, FakeServer, Vec<String>) {
    let mut cfg = FakeConfig::turns(turns);
    cfg.props = true;
    let fake = FakeServer::start(cfg).await;
    let mut mc = OpenAiConfig::new(fake.base_url.clone(), "fake-model");
    mc.api = Api::Chat;
    let model = Arc::new(OpenAiModel::new(mc).expect("client builds"));
    let agent = agent(model, |c| {
        c.api = Api::Chat;
        c.max_steps = 3;
    });
    let (sink, events) = collect_events();
    let outcome = agent.run_with(task, with_events(sink)).await;
    assert!(
        fake.requests()
            .iter()
            .all(|r| r.body.get("grammar").is_some()),
        "every turn is constrained"
    );
    let notices = events
        .lock()
        .expect("lock")
        .iter()
        .filter_map(|e| match e {
            Event::Notice { kind, .. } => Some(kind.clone()),
            _ => None,
        })
        .collect();
    (outcome, fake, notices)
}

/// The messages of request `i` as one text.
fn sent(server: &FakeServer, i: usize) -> String {
    let reqs = server.requests();
    let messages = reqs[i].body["messages"].as_array().expect("messages");
    messages
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn a_sentence_nobody_gave_said_again_in_a_call_is_cut_and_not_run() {
    let (outcome, server, notices) = run("Echo a short note.", vec![call(), ANSWER.into()]).await;
    assert_eq!(outcome.status, Status::Ok, "{:?}", outcome.error);
    assert!(outcome.progress.tools_used.is_empty());
    assert!(
        notices
            .iter()
            .any(|k| k == NoticeKind::RepetitionCut.as_str()),
        "{notices:?}"
    );
    let second = sent(&server, 1);
    assert!(second.contains("Your turn was cut off"), "{second}");
    // The history keeps the call up to its first copy.
    assert_eq!(second.matches("from the user").count(), 1, "{second}");
}

#[tokio::test]
async fn a_sentence_the_task_asked_for_again_and_again_runs() {
    let task = "Echo 'This is a note from the user.' six times.";
    let (outcome, server, notices) = run(task, vec![call(), ANSWER.into()]).await;
    assert_eq!(outcome.status, Status::Ok, "{:?}", outcome.error);
    assert_eq!(outcome.progress.tools_used, ["echo"]);
    assert!(
        !notices
            .iter()
            .any(|k| k == NoticeKind::RepetitionCut.as_str()),
        "{notices:?}"
    );
    let echoed = format!("echo: {}", SENTENCE.repeat(6));
    assert!(
        sent(&server, 1).contains(echoed.trim_end()),
        "every copy was echoed"
    );
}
