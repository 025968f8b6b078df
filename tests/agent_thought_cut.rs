//! A constrained turn that never leaves its thought (docs/protocol.md §1.7): the model repeats
//! a sentence inside it until the degeneration guard cuts the turn, or its token budget runs
//! out. The turn is continued from the cut, with the thought closed and the decision's grammar,
//! so it still ends in an action or an answer — through the real HTTP client against the fake
//! llama.cpp, over completions and over chat with prefill.

mod common;

use std::sync::{Arc, Mutex};

use common::agent::population;
use common::fake_server::{FakeConfig, FakeServer};
use pretty_assertions::assert_eq;

use tagloop::agent::{Agent, AgentConfig, Event, RunOptions, Status};
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::llm::{Api, GrammarMode, NoticeKind, ServerKind};
use tagloop::tools::Registry;

fn tools() -> Registry {
    population(|city| format!("{city} has 2102650 people"))
}

/// A thought that says the same sentence again and again (what SmolLM2 writes when the grammar
/// masks the end of text it wants).
fn looping_thought(opened: bool) -> String {
    let head = if opened { "" } else { "<thought>" };
    format!(
        "{head}I need the population of Paris. {}",
        "I need the population of Paris. ".repeat(40)
    )
}

struct Ran {
    outcome: tagloop::agent::Outcome,
    server: FakeServer,
    agent: Agent,
    notices: Vec<String>,
}

/// The fake server's configuration with these replies.
fn script(turns: Vec<String>) -> FakeConfig {
    FakeConfig::turns(turns)
}

/// A run against the fake llama.cpp (or a server stated as `server`), three steps.
async fn run(
    (api, server): (Api, Option<ServerKind>),
    mut cfg: FakeConfig,
    prefill: bool,
    max_tokens: Option<u32>,
) -> Ran {
    cfg.props = server.is_none();
    let fake = FakeServer::start(cfg).await;
    let mut mc = OpenAiConfig::new(fake.base_url.clone(), "fake-model");
    mc.api = api;
    mc.prefill = prefill;
    mc.server = server;
    let model = Arc::new(OpenAiModel::new(mc).expect("client builds"));
    let config = AgentConfig {
        api,
        max_steps: 3,
        max_tokens,
        ..AgentConfig::default()
    };
    let agent = Agent::builder(model)
        .tools(tools())
        .config(config)
        .build()
        .expect("agent builds");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let options = RunOptions {
        events: Some(Arc::new(move |e: &Event| {
            if let Event::Notice { kind, .. } = e {
                sink.lock().unwrap().push(kind.clone());
            }
        })),
        ..Default::default()
    };
    let outcome = agent
        .run_with("How many people live in Paris?", options)
        .await;
    let notices = seen.lock().unwrap().clone();
    Ran {
        outcome,
        server: fake,
        agent,
        notices,
    }
}

#[tokio::test]
async fn a_thought_cut_as_repeating_is_continued_to_its_decision() {
    // Over chat, llama.cpp (detected here by its `/props`) continues an assistant message
    // without `--prefill`.
    for (api, prefill) in [
        (Api::Completions, false),
        (Api::Chat, false),
        (Api::Chat, true),
    ] {
        let opened = api == Api::Completions;
        let ran = run(
            (api, None),
            script(vec![
                looping_thought(opened),
                "<action>population(city=\"Paris\")</action>".into(),
                "<thought>I know it.</thought>\n<final_answer>2102650</final_answer>".into(),
            ]),
            prefill,
            None,
        )
        .await;
        assert_eq!(
            ran.outcome.status,
            Status::Ok,
            "{api:?}: {:?}",
            ran.outcome.error
        );
        assert_eq!(
            ran.outcome.final_answer.as_ref().and_then(|v| v.as_str()),
            Some("2102650")
        );
        // The tool ran: the continued turn was one step, not a correction.
        assert_eq!(ran.outcome.progress.steps, 1, "{api:?}");
        assert_eq!(ran.outcome.progress.tools_used, ["population"], "{api:?}");
        assert!(
            ran.notices
                .iter()
                .any(|k| k == NoticeKind::RepetitionCut.as_str()),
            "{:?}",
            ran.notices
        );
        assert!(
            ran.notices
                .iter()
                .any(|k| k == NoticeKind::ThoughtCut.as_str()),
            "{:?}",
            ran.notices
        );
        let reqs = ran.server.requests();
        assert_eq!(reqs.len(), 3, "{api:?}");
        // The continuation: the cut thought once, closed, then the decision's grammar alone.
        let prompt = match api {
            Api::Completions => reqs[1].body["prompt"].as_str().unwrap().to_string(),
            _ => {
                let messages = reqs[1].body["messages"].as_array().unwrap();
                let last = messages.last().unwrap();
                assert_eq!(
                    last["role"], "assistant",
                    "prefill continues the model's turn"
                );
                last["content"].as_str().unwrap().to_string()
            }
        };
        assert!(
            prompt.ends_with("I need the population of Paris.\n</thought>\n"),
            "{api:?}: {prompt:?}"
        );
        assert_eq!(
            prompt.matches("I need the population").count(),
            1,
            "{prompt:?}"
        );
        let first = reqs[0].body["grammar"].as_str().expect("a grammar");
        let decision = reqs[1].body["grammar"]
            .as_str()
            .expect("the decision's grammar");
        assert_eq!(first, ran.agent.turn_grammar(false));
        assert_ne!(decision, first);
        assert!(tagloop::protocol::parse_gbnf(decision).is_ok());
        assert!(decision.contains("\"population(\"") && decision.contains("<final_answer>"));
        assert!(!decision.contains("thought"), "{decision}");
        // The next turn is a whole turn again.
        assert_eq!(reqs[2].body["grammar"].as_str(), Some(first));
    }
}

/// Out of tokens inside the thought: the same continuation, once per turn.
#[tokio::test]
async fn a_thought_out_of_tokens_is_continued_once() {
    // The fake honours max_tokens by cutting the reply (3 characters per token).
    let ran = run(
        (Api::Completions, None),
        script(vec![
            "I am thinking about what to do here, and it is taking a long time to decide".into(),
            // The continuation runs out too, still with no decision (the fake ignores the
            // grammar): the turn is not continued a second time.
            "more words than the budget holds, and more words than the budget holds".into(),
            "<final_answer>2102650</final_answer>".into(),
        ]),
        false,
        Some(8),
    )
    .await;
    let reqs = ran.server.requests();
    assert!(
        reqs[1].body["grammar"]
            .as_str()
            .is_some_and(|g| !g.contains("thought"))
    );
    assert!(
        reqs[1].body["prompt"]
            .as_str()
            .unwrap()
            .ends_with("\n</thought>\n")
    );
    // The third request is the next turn (a correction after the cut action), not a third
    // piece of the same turn.
    assert_eq!(
        reqs[2].body["grammar"].as_str(),
        Some(ran.agent.turn_grammar(false).as_str())
    );
    assert_eq!(
        ran.notices
            .iter()
            .filter(|k| *k == NoticeKind::ThoughtCut.as_str())
            .count(),
        1,
        "{:?}",
        ran.notices
    );
}

/// Without a grammar there is nothing to continue under: a looping thought is cut and
/// corrected as before.
#[tokio::test]
async fn free_turns_are_not_continued() {
    let mut cfg = FakeConfig::turns([
        looping_thought(true),
        "<final_answer>2102650</final_answer>".to_string(),
    ]);
    cfg.props = false;
    let server = FakeServer::start(cfg).await;
    let mut mc = OpenAiConfig::new(server.base_url.clone(), "fake-model");
    mc.api = Api::Completions;
    mc.grammar = GrammarMode::Off;
    let model = Arc::new(OpenAiModel::new(mc).unwrap());
    let agent = Agent::builder(model)
        .tools(tools())
        .api(Api::Completions)
        .build()
        .unwrap();
    let outcome = agent.run("How many people live in Paris?").await;
    assert_eq!(outcome.status, Status::Ok);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs.iter().all(|r| r.body.get("grammar").is_none()));
    // The second request is a new turn after the repetition correction.
    assert!(
        reqs[1].body["prompt"]
            .as_str()
            .unwrap()
            .contains("kept repeating")
    );
}

/// Over chat to a server that does not continue an assistant message (vLLM without
/// `--prefill`), the cut thought cannot be continued: it is corrected as before.
#[tokio::test]
async fn a_chat_server_without_prefill_gets_the_correction() {
    let ran = run(
        (Api::Chat, Some(ServerKind::Vllm)),
        script(vec![
            looping_thought(false),
            "<thought>Again.</thought>\n<final_answer>2102650</final_answer>".into(),
        ]),
        false,
        None,
    )
    .await;
    assert_eq!(ran.outcome.status, Status::Ok, "{:?}", ran.outcome.error);
    let reqs = ran.server.requests();
    assert_eq!(reqs.len(), 2);
    // vLLM's grammar field on both: the second request is a whole new turn after the
    // repetition correction, not a continuation.
    assert!(
        reqs.iter()
            .all(|r| r.body["structured_outputs"]["grammar"].is_string())
    );
    let last = reqs[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "user");
    assert!(
        last["content"].as_str().unwrap().contains("kept repeating"),
        "{last}"
    );
    assert!(
        !ran.notices
            .iter()
            .any(|k| k == NoticeKind::ThoughtCut.as_str())
    );
}

/// A chat server that refuses to continue the assistant's turn (llama.cpp before its prefill
/// support, under a thinking template, answers 400): the cut turn ends where it was and is
/// corrected, no turn is continued again, and the run goes on.
#[tokio::test]
async fn a_server_that_refuses_the_prefill_gets_the_correction_and_the_run_goes_on() {
    let mut cfg = FakeConfig::turns([
        looping_thought(false),
        looping_thought(false),
        "<thought>Again.</thought>\n<final_answer>2102650</final_answer>".into(),
    ]);
    cfg.reject_prefill = true;
    let Ran {
        outcome,
        server,
        notices: kinds,
        ..
    } = run((Api::Chat, None), cfg, false, None).await;
    assert_eq!(outcome.status, Status::Ok, "{:?}", outcome.error);
    let count = |k: NoticeKind| kinds.iter().filter(|s| *s == k.as_str()).count();
    assert_eq!(count(NoticeKind::PrefillRejected), 1, "{kinds:?}");
    // Only the first cut thought was tried as a continuation; the second was corrected at once.
    assert_eq!(count(NoticeKind::ThoughtCut), 1, "{kinds:?}");
    let reqs = server.requests();
    // cut, refused continuation, cut again (corrected, not continued), the answer.
    assert_eq!(
        reqs.len(),
        4,
        "{:?}",
        reqs.iter()
            .map(|r| r.body["messages"].as_array().map(|m| m.len()))
            .collect::<Vec<_>>()
    );
    let last =
        |i: usize| reqs[i].body["messages"].as_array().unwrap().last().unwrap()["role"].clone();
    assert_eq!(last(1), "assistant");
    assert_eq!(last(2), "user");
    assert!(
        reqs[2].body["messages"].as_array().unwrap().last().unwrap()["content"]
            .as_str()
            .unwrap()
            .contains("kept repeating")
    );
}
