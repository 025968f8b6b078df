//! The whole loop through the real HTTP client against the fake OpenAI-compatible server on
//! loopback: chat and completions, and servers that strip, keep or ignore the stop strings.

mod common;

use std::sync::Arc;

use common::agent::population;
use common::fake_server::{FakeConfig, FakeServer, StopMode};
use pretty_assertions::assert_eq;
use serde_json::json;

use tagloop::agent::{Agent, Status};
use tagloop::llm::Api;
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::secret::Secret;
use tagloop::tools::Registry;

/// `population`: Paris's, or "unknown".
fn tools() -> Registry {
    population(|city| {
        if city == "Paris" {
            "2102650".to_string()
        } else {
            "unknown".to_string()
        }
    })
}

/// The model's turns, written as a model that does not stop by itself would: it goes on to invent
/// an observation and an answer, which the stops must cut.
const TURNS: [&str; 2] = [
    "<thought>I need the population.</thought>\n<action>population(city=\"Paris\")</action>\n<observation>1 million</observation>\n<final_answer>wrong</final_answer>",
    "<thought>Now I know.</thought>\n<final_answer>Paris has 2102650 people.</final_answer>\n<thought>extra</thought>",
];

async fn run(api: Api, stop_mode: StopMode, stream: bool) -> (tagloop::agent::Outcome, FakeServer) {
    let mut cfg = FakeConfig::turns(TURNS);
    cfg.stop_mode = stop_mode;
    cfg.require_key = Some("k-123".into());
    let server = FakeServer::start(cfg).await;
    let mut mc = OpenAiConfig::new(server.base_url.clone(), "fake-model");
    mc.api = api;
    mc.stream = stream;
    mc.api_key = Secret::new("k-123");
    let model = Arc::new(OpenAiModel::new(mc).expect("client builds"));
    let agent = Agent::builder(model)
        .tools(tools())
        .api(api)
        .build()
        .unwrap();
    (agent.run("How many people live in Paris?").await, server)
}

#[tokio::test]
async fn chat_and_completions_end_to_end_under_every_stop_behaviour() {
    for api in [Api::Chat, Api::Completions] {
        for mode in [
            StopMode::Strip,
            StopMode::Keep,
            StopMode::Ignore,
            StopMode::Reject,
            StopMode::FlushPartial,
        ] {
            for stream in [true, false] {
                let (o, server) = run(api, mode, stream).await;
                let what = format!("{api:?} {mode:?} stream={stream}");
                assert_eq!(o.status, Status::Ok, "{what}: {:?}", o.error);
                assert_eq!(
                    o.final_answer,
                    Some(json!("Paris has 2102650 people.")),
                    "{what}"
                );
                assert_eq!((o.progress.steps, o.progress.llm_calls), (1, 2), "{what}");
                assert_eq!(
                    o.progress.tools_used,
                    vec!["population".to_string()],
                    "{what}"
                );
                // The invented observation never reached the history; the real one did.
                let all: String = o.messages.iter().map(|m| m.content.as_str()).collect();
                assert!(
                    !all.contains("1 million") && all.contains("2102650"),
                    "{what}"
                );
                let turn = o
                    .messages
                    .iter()
                    .find(|m| m.role == tagloop::llm::Role::Assistant)
                    .unwrap();
                assert!(
                    turn.content
                        .ends_with("population(city=\"Paris\")</action>"),
                    "{what}: {}",
                    turn.content
                );
                // What was sent: the protocol's stop strings (unless the server rejected them).
                let reqs = server.requests();
                assert!(reqs.len() >= 2, "{what}");
                let path = if api == Api::Chat {
                    "/v1/chat/completions"
                } else {
                    "/v1/completions"
                };
                assert!(reqs.iter().all(|r| r.path == path), "{what}");
                let last = reqs.last().unwrap();
                if mode == StopMode::Reject {
                    assert!(
                        last.stops().is_empty(),
                        "{what}: stops are dropped after a rejection"
                    );
                } else {
                    // The first four stops are sent (`</function_calls>` is enforced only).
                    assert_eq!(
                        last.stops(),
                        [
                            "</action>",
                            "<observation>",
                            "</final_answer>",
                            "</tool_call>"
                        ],
                        "{what}"
                    );
                }
                if api == Api::Completions {
                    let prompt = last.body["prompt"].as_str().unwrap();
                    assert!(
                        prompt.ends_with("</observation>\n<thought>"),
                        "{what}: {prompt}"
                    );
                }
            }
        }
    }
}

#[tokio::test]
async fn an_unreachable_server_is_status_error_with_an_actionable_message() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let mut mc = OpenAiConfig::new(format!("http://127.0.0.1:{port}/v1"), "m");
    mc.max_retries = 1;
    mc.retry_min_delay = std::time::Duration::from_millis(10);
    let agent = Agent::builder(Arc::new(OpenAiModel::new(mc).unwrap()))
        .build()
        .unwrap();
    let o = agent.run("t").await;
    assert_eq!(o.status, Status::Error);
    let e = o.error.unwrap();
    assert!(
        e.contains("cannot connect") && e.contains(&port.to_string()),
        "{e}"
    );
}

/// On a server that takes grammars (a fake llama.cpp), every fresh turn carries the grammar of
/// the protocol over the agent's tools, the last turn at the step limit one that allows only a
/// final answer, and the events say each turn was constrained.
#[tokio::test]
async fn turns_carry_the_grammar_on_llama_cpp() {
    for api in [Api::Chat, Api::Completions] {
        let mut cfg = FakeConfig::turns(TURNS);
        cfg.props = true;
        let server = FakeServer::start(cfg).await;
        let mut mc = OpenAiConfig::new(server.base_url.clone(), "fake-model");
        mc.api = api;
        let model = Arc::new(OpenAiModel::new(mc).expect("client builds"));
        let agent = Agent::builder(model)
            .tools(tools())
            .api(api)
            .max_steps(1)
            .build()
            .unwrap();
        let events = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = events.clone();
        let options = tagloop::agent::RunOptions {
            events: Some(Arc::new(move |e: &tagloop::agent::Event| {
                if let tagloop::agent::Event::TurnFinished { constraint, .. } = e {
                    sink.lock().unwrap().push(*constraint);
                }
            })),
            ..Default::default()
        };
        let outcome = agent
            .run_with("How many people live in Paris?", options)
            .await;
        // One step, then the last turn answers: the run ends at the limit with that answer.
        assert_eq!(
            outcome.status,
            Status::MaxSteps,
            "{api:?}: {:?}",
            outcome.error
        );
        assert!(outcome.final_answer.is_some());
        let reqs = server.requests();
        assert_eq!(reqs.len(), 2);
        let step = reqs[0].body["grammar"].as_str().expect("a grammar");
        let last = reqs[1].body["grammar"].as_str().expect("a grammar");
        assert_eq!(step, agent.turn_grammar(false));
        assert_eq!(last, agent.turn_grammar(true));
        assert!(tagloop::protocol::parse_gbnf(step).is_ok());
        assert!(step.contains("\"population(\"") && step.contains("<action>"));
        assert!(!last.contains("<action>"), "the last turn can only answer");
        // Completions prompts end inside the opened thought: the grammar starts there.
        assert_eq!(
            step.starts_with("root ::= (\"<thought>\""),
            api == Api::Chat
        );
        let seen = events.lock().unwrap().clone();
        assert_eq!(seen, vec![tagloop::llm::Constraint::Grammar; 2], "{api:?}");
    }
}

/// The library's side of "no --model": the ids a server lists, over the same client (key
/// included), and the errors that say what to do.
#[tokio::test]
async fn served_models_lists_the_ids_and_explains_a_404() {
    let mut cfg = FakeConfig::turns(TURNS);
    cfg.served_models = Some(vec!["a".into(), "b".into()]);
    let server = FakeServer::start(cfg).await;
    let mut mc = OpenAiConfig::new(server.base_url.clone(), "");
    mc.api_key = Secret::new("k-123");
    let model = OpenAiModel::new(mc).expect("client builds");
    assert_eq!(model.served_models().await.unwrap(), ["a", "b"]);
    assert_eq!(
        server.model_lists(),
        [Some("Bearer k-123".to_string())],
        "one request, with the key a turn would carry"
    );
    // Without /v1 the list is not found, and the error says where to look.
    let root = server.base_url.trim_end_matches("/v1").to_string();
    let model = OpenAiModel::new(OpenAiConfig::new(root.clone(), "")).unwrap();
    let err = model.served_models().await.unwrap_err();
    assert_eq!(err.status(), Some(404));
    assert!(
        err.to_string()
            .contains(&format!("try --base-url {root}/v1")),
        "{err}"
    );
}
