//! A constrained turn whose free-text final answer says the same sentence again and again
//! (SmolLM2 under the grammar: "You can't do it.\n\n" until the ordinary degeneration guard cut
//! it at 150 tokens) is cut by the strict guard after three copies and answers with one; an
//! answer in JSON (a role with an output schema) is left to the ordinary guard. Through the
//! real HTTP client against the fake llama.cpp, which sends the grammar.

mod common;

use std::sync::Arc;

use common::fake_server::{FakeConfig, FakeServer};
use pretty_assertions::assert_eq;
use serde_json::json;

use tagloop::agent::{Agent, AgentConfig, Role, Status};
use tagloop::llm::Api;
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};

const SENTENCE: &str = "The project codename is HERON, as the intro says. ";

/// A run against the fake llama.cpp (detected by its `/props`, so every turn carries the
/// grammar), one turn replying `reply`; the outcome and the request count.
async fn run(reply: String, role: Role) -> (tagloop::agent::Outcome, usize) {
    let mut cfg = FakeConfig::turns(vec![reply]);
    cfg.props = true;
    let fake = FakeServer::start(cfg).await;
    let mut mc = OpenAiConfig::new(fake.base_url.clone(), "fake-model");
    mc.api = Api::Chat;
    let model = Arc::new(OpenAiModel::new(mc).expect("client builds"));
    let config = AgentConfig {
        api: Api::Chat,
        max_steps: 3,
        ..AgentConfig::default()
    };
    let agent = Agent::builder(model)
        .role(role)
        .config(config)
        .build()
        .expect("agent builds");
    let outcome = agent.run("What is the project codename?").await;
    let requests = fake.requests();
    assert!(
        requests.iter().all(|r| r.body.get("grammar").is_some()),
        "every turn is constrained"
    );
    (outcome, requests.len())
}

#[tokio::test]
async fn a_free_answer_said_again_and_again_is_cut_to_one_copy() {
    // Nine copies, 450 bytes: the ordinary guard (eight copies over 512 bytes) keeps them.
    let reply = format!(
        "<thought>I know it.</thought>\n<final_answer>{}",
        SENTENCE.repeat(9)
    );
    let (outcome, requests) = run(reply, Role::new("assistant", "")).await;
    assert_eq!(outcome.status, Status::Ok, "{:?}", outcome.error);
    let answer = outcome.final_answer.as_ref().and_then(|v| v.as_str());
    assert_eq!(answer.map(str::trim), Some(SENTENCE.trim()));
    assert_eq!(requests, 1);
}

#[tokio::test]
async fn an_answer_in_json_is_left_to_the_ordinary_guard() {
    let role = Role::new("assistant", "")
        .with_output_schema(json!({
            "type": "object",
            "properties": {"codename": {"type": "string"}},
            "required": ["codename"]
        }))
        .expect("the schema compiles");
    let value = SENTENCE.repeat(9);
    let reply = format!(
        "<thought>I know it.</thought>\n<final_answer>{}</final_answer>",
        json!({ "codename": value })
    );
    let (outcome, _) = run(reply, role).await;
    assert_eq!(outcome.status, Status::Ok, "{:?}", outcome.error);
    assert_eq!(outcome.final_answer, Some(json!({ "codename": value })));
}
