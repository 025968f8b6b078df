//! A file the question names that the workspace lacks is a path the run's grammar allows
//! (`src/agent/grammars/named.rs`): the model can ask for it, the tool says it is not found, and the
//! named-files notice never asks for a call no grammar lets the model write. A bare name that a
//! listed file ends with is not added: the listing's path is the one the model is steered to.

mod common;

use std::sync::Arc;

use serde_json::Value;
use tagloop::agent::{Agent, AgentConfig};
use tagloop::llm::Api;
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::tools::{ToolkitOptions, Workspace, toolkit};

use common::fake_server::{FakeConfig, FakeServer};

/// A run of `task` over a workspace holding `logs/server.log`, against the fake llama.cpp (every
/// turn constrained), the fake replying `turns`; the grammars of its requests and its answer.
async fn run(task: &str, turns: &[&str]) -> (Vec<String>, Option<Value>, FakeServer) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("logs")).expect("mkdir");
    std::fs::write(dir.path().join("logs/server.log"), "a\nb\n").expect("write");
    let ws = Arc::new(Workspace::new(dir.path()).expect("workspace"));
    let mut cfg = FakeConfig::turns(turns.iter().copied());
    cfg.props = true;
    let server = FakeServer::start(cfg).await;
    let mut mc = OpenAiConfig::new(server.base_url.clone(), "fake-model");
    mc.api = Api::Chat;
    let model = Arc::new(OpenAiModel::new(mc).expect("client builds"));
    let config = AgentConfig {
        api: Api::Chat,
        max_steps: 3,
        decide: false,
        ..AgentConfig::default()
    };
    let agent = Agent::builder(model)
        .tools(toolkit(ws, ToolkitOptions::default()))
        .config(config)
        .build()
        .expect("agent builds");
    let outcome = agent.run(task).await;
    let grammars = server
        .requests()
        .iter()
        .map(|r| r.body["grammar"].as_str().unwrap_or_default().to_string())
        .collect();
    (grammars, outcome.final_answer, server)
}

/// The alternatives of the grammar's `path-file` rule.
fn files(grammar: &str) -> String {
    grammar
        .lines()
        .find_map(|l| l.strip_prefix("path-file ::= "))
        .unwrap_or_else(|| panic!("no file list in\n{grammar}"))
        .to_string()
}

#[tokio::test]
async fn a_named_file_that_is_not_there_can_be_asked_for() {
    let (grammars, answer, server) = run(
        "How many lines does logs/mail.log have?",
        &[
            "<thought>I read it.</thought>\n<action>read_file(path=\"logs/mail.log\")</action>",
            "<thought>It is not there.</thought>\n<final_answer>logs/mail.log does not exist.</final_answer>",
        ],
    )
    .await;
    assert_eq!(grammars.len(), 2, "one request a turn, no refusal");
    for g in &grammars {
        let list = files(g);
        assert!(list.contains("logs/mail.log"), "{list}");
        assert!(list.contains("logs/server.log"), "{list}");
    }
    // The tool's own answer reached the model, and no notice asked for the file again.
    let reqs = server.requests();
    let last = reqs[1].body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(last.contains("not found"), "{last}");
    assert!(!last.contains("no call has used yet"), "{last}");
    assert_eq!(answer, Some(Value::from("logs/mail.log does not exist.")));
}

#[tokio::test]
async fn only_names_missing_from_the_listing_are_added() {
    // A bare name a listed file ends with stays the listed path; a question naming nothing
    // leaves the listing as it is.
    for task in ["How many lines does server.log have?", "Count the lines."] {
        let (grammars, _, _) = run(
            task,
            &["<thought>Done.</thought>\n<final_answer>2</final_answer>"],
        )
        .await;
        assert_eq!(files(&grammars[0]), r#""\"logs/server.log\"""#, "{task}");
    }
}
