//! A constrained answer that goes on with the runtime's own notes (issue 31 item 5: gemma's
//! answer `The answer is 4.` followed by the loop notice it had read, then the same notice again
//! with its own count, to the 1,024-token budget) is cut where the echo begins and the answer
//! before it taken; an answer that quotes a tool's long line is not cut. Through the real HTTP
//! client against the fake llama.cpp, which sends the grammar.

mod common;

use std::sync::Arc;

use common::agent::{agent, collect_events, with_events};
use common::fake_server::{FakeConfig, FakeServer};
use pretty_assertions::assert_eq;

use tagloop::agent::{Event, Outcome, Status};
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::llm::{Api, NoticeKind};

/// The closing sentence of every observation of a tool that ran (the runtime's words).
const DECIDE: &str = "If the results so far answer the whole question, give your final answer now; if not, call another tool.";

/// A run against the fake llama.cpp (its `/props` makes every turn constrained), the fake
/// replying `turns`: the outcome, the requests' count and whether a repetition cut was told.
async fn run(turns: Vec<String>) -> (Outcome, usize, bool) {
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
    let outcome = agent
        .run_with("What does the tool say?", with_events(sink))
        .await;
    let requests = fake.requests();
    assert!(
        requests.iter().all(|r| r.body.get("grammar").is_some()),
        "every turn is constrained"
    );
    let cut = events.lock().expect("lock").iter().any(
        |e| matches!(e, Event::Notice { kind, .. } if kind == NoticeKind::RepetitionCut.as_str()),
    );
    (outcome, requests.len(), cut)
}

fn answer(outcome: &Outcome) -> Option<&str> {
    outcome.final_answer.as_ref().and_then(|v| v.as_str())
}

#[tokio::test]
async fn an_answer_that_goes_on_with_the_runtimes_notes_is_cut_before_them() {
    let echoed = format!(
        "<thought>I know.</thought>\n<final_answer>The tool says hi.\n<comment>\n{DECIDE}\n[2 steps left]\n</comment>\n<comment>\n{DECIDE}\n"
    );
    let (outcome, requests, cut) =
        run(vec!["<action>echo(text=\"hi\")</action>".into(), echoed]).await;
    assert_eq!(outcome.status, Status::Ok, "{:?}", outcome.error);
    assert_eq!(answer(&outcome), Some("The tool says hi."));
    assert_eq!(requests, 2);
    assert!(cut, "the cut is told");
}

#[tokio::test]
async fn an_answer_that_quotes_a_tools_long_line_is_whole() {
    let line = "The quick brown fox jumps over the lazy dog, twice over.";
    let quoted =
        format!("<thought>I know.</thought>\n<final_answer>It says: echo: {line}</final_answer>");
    let (outcome, _, cut) = run(vec![
        format!("<action>echo(text=\"{line}\")</action>"),
        quoted,
    ])
    .await;
    assert_eq!(outcome.status, Status::Ok, "{:?}", outcome.error);
    assert_eq!(
        answer(&outcome),
        Some(format!("It says: echo: {line}").as_str())
    );
    assert!(!cut);
}

/// A thought may restate a note: that is how a model takes it up (the 0.5B Qwen's `The question
/// names summary.txt, which no call has used yet: call a tool on it…`, then the call).
#[tokio::test]
async fn a_thought_that_restates_a_note_is_whole() {
    let restated = format!(
        "<thought>{DECIDE} So I answer.</thought>\n<final_answer>The tool says hi.</final_answer>"
    );
    let (outcome, requests, cut) =
        run(vec!["<action>echo(text=\"hi\")</action>".into(), restated]).await;
    assert_eq!(outcome.status, Status::Ok, "{:?}", outcome.error);
    assert_eq!(answer(&outcome), Some("The tool says hi."));
    assert_eq!(requests, 2);
    assert!(!cut);
}
