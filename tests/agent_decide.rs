//! The decision step before a run's first tool call (`src/agent/first_call.rs`), through the
//! real HTTP client against the fake llama.cpp (which takes grammars): a question that names no
//! file, whose own function (the model's guess) is not about the called tool, is answered
//! without the call; a question that names the workspace keeps its call without a guess; a guess
//! about the tool keeps it; a guess the server fails keeps it; `decide: false` turns it off.

mod common;

use std::sync::Arc;

use common::agent::collect_events;
use common::fake_server::{FakeConfig, FakeGuess, FakeServer};
use common::tools::{Env, env_with};
use serde_json::Value;
use tagloop::agent::{Agent, AgentConfig, Event, RunOptions, Status};
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::policy::{Policies, Policy};
use tagloop::prompt::DECLINED_THOUGHT;
use tagloop::tools::ToolkitOptions;

/// The 0.5B's first turn on `direct-capital` (the old system prompt's example copied).
const CAPITAL_CALL: &str = "<thought>The question names France, so I read it.</thought>\n<action>read_file(path=\"garden/kites.yaml\")</action>";
const PARIS: &str = "<thought>I know this.</thought>\n<final_answer>Paris</final_answer>";

struct Ran {
    outcome: tagloop::agent::Outcome,
    fake: FakeServer,
    events: Vec<Event>,
    _env: Env,
}

/// Run `task` over the built-in read tools (a workspace holding `docs/setup.md`), against the
/// fake llama.cpp with these turns and this guess.
async fn run(
    task: &str,
    turns: &[&str],
    guess: FakeGuess,
    tune: impl FnOnce(&mut AgentConfig),
) -> Ran {
    let env = env_with(ToolkitOptions::default());
    env.write("docs/setup.md", "The server listens on port 8080.\n");
    let fake = FakeServer::start(FakeConfig {
        props: true,
        guess,
        ..FakeConfig::turns(turns.iter().map(|t| t.to_string()).collect::<Vec<_>>())
    })
    .await;
    let model =
        Arc::new(OpenAiModel::new(OpenAiConfig::new(fake.base_url.clone(), "fake-model")).unwrap());
    let mut config = AgentConfig {
        max_steps: 4,
        ..AgentConfig::default()
    };
    tune(&mut config);
    let agent = Agent::builder(model)
        .tools(env.reg.clone())
        .config(config)
        .build()
        .unwrap();
    let (sink, store) = collect_events();
    let options = RunOptions {
        events: Some(sink),
        ..Default::default()
    };
    let outcome = agent.run_with(task, options).await;
    let events = store.lock().unwrap().clone();
    Ran {
        outcome,
        fake,
        events,
        _env: env,
    }
}

fn named(name: &str) -> FakeGuess {
    FakeGuess {
        reply: Some(name.to_string()),
        ..FakeGuess::default()
    }
}

fn tools_started(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolStarted { tool } => Some(tool.clone()),
            _ => None,
        })
        .collect()
}

fn decisions(events: &[Event]) -> Vec<(Option<String>, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Decision {
                guess, declined, ..
            } => Some((guess.clone(), *declined)),
            _ => None,
        })
        .collect()
}

fn grammar(body: &Value) -> &str {
    body["grammar"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_question_that_needs_no_file_is_answered_without_the_call() {
    let ran = run(
        "What is the capital of France?",
        &[CAPITAL_CALL, PARIS],
        named("get_capital"),
        |_| {},
    )
    .await;
    assert_eq!(ran.outcome.status, Status::Ok, "{:?}", ran.outcome.error);
    assert_eq!(ran.outcome.final_answer, Some(Value::from("Paris")));
    assert!(tools_started(&ran.events).is_empty(), "no tool ran");
    assert_eq!(
        decisions(&ran.events),
        [(Some("get_capital".to_string()), true)]
    );
    assert_eq!(ran.outcome.progress.steps, 0, "a declined call is no step");
    // One guess, of the question alone; then the same prompt again, under the answer-only
    // grammar: the declined turn never entered the history.
    let guesses = ran.fake.guesses();
    assert_eq!(guesses.len(), 1);
    let asked = guesses[0]["messages"].to_string();
    assert!(asked.contains("What is the capital of France?"), "{asked}");
    assert!(!asked.contains("read_file"), "{asked}");
    let reqs = ran.fake.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body["messages"], reqs[1].body["messages"]);
    assert!(grammar(&reqs[0].body).contains("<action>"));
    assert!(!grammar(&reqs[1].body).contains("<action>"));
    assert!(grammar(&reqs[1].body).contains("<final_answer>")); // The answer's thought begins in the runtime's words: asked again, the model would write
    // the thought that led to the call and answer after it (issue 31, the 1.5B's "yellow").
    let own = format!("\"<thought>{DECLINED_THOUGHT}\" thought-word+ thought-end");
    assert!(
        grammar(&reqs[1].body).contains(&own),
        "{}",
        grammar(&reqs[1].body)
    );
    assert!(!grammar(&reqs[0].body).contains(DECLINED_THOUGHT));
}

#[tokio::test]
async fn a_question_that_names_the_workspace_keeps_its_call_without_a_guess() {
    // The guess would name `get_port`, which shares no word with `read_file`: never asked.
    let ran = run(
        "Which port does docs/setup.md mention? Answer with the number.",
        &[
            "<thought>I read it.</thought>\n<action>read_file(path=\"docs/setup.md\")</action>",
            "<thought>It says 8080.</thought>\n<final_answer>8080</final_answer>",
        ],
        named("get_port"),
        |_| {},
    )
    .await;
    assert_eq!(ran.outcome.final_answer, Some(Value::from("8080")));
    assert_eq!(tools_started(&ran.events), ["read_file"]);
    assert_eq!(decisions(&ran.events), [(None, false)]);
    assert!(ran.fake.guesses().is_empty());
    // So does one whose file is named by what the workspace holds ("setup"), and one whose
    // guess is about the called tool.
    for (task, guess) in [
        ("What does the setup say?", "get_port"),
        ("What does the server listen on?", "read_text_file"),
    ] {
        let ran = run(
            task,
            &[
                "<thought>I read it.</thought>\n<action>read_file(path=\"docs/setup.md\")</action>",
                "<thought>Port 8080.</thought>\n<final_answer>port 8080</final_answer>",
            ],
            named(guess),
            |_| {},
        )
        .await;
        assert_eq!(tools_started(&ran.events), ["read_file"], "{task}");
        assert!(decisions(&ran.events).iter().all(|(_, d)| !d), "{task}");
    }
}

#[tokio::test]
async fn a_guess_the_server_fails_or_that_names_nothing_or_loops_keeps_the_call() {
    let failed = FakeGuess {
        fail: true,
        ..FakeGuess::default()
    };
    for (guess, decided) in [
        (failed, vec![]),
        (FakeGuess::default(), vec![(None, false)]),
        (
            named("get_value"),
            vec![(Some("get_value".to_string()), false)],
        ),
        // A loop on one word is no guess (it would share no word with `read_file`).
        (
            named("capital_capital_capital_capital"),
            vec![(Some("capital_capital_capital_capital".to_string()), false)],
        ),
    ] {
        let ran = run(
            "What is the capital of France?",
            &[CAPITAL_CALL, PARIS],
            guess,
            |_| {},
        )
        .await;
        assert_eq!(tools_started(&ran.events), ["read_file"]);
        assert_eq!(decisions(&ran.events), decided);
        assert_eq!(ran.outcome.final_answer, Some(Value::from("Paris")));
    }
}

#[tokio::test]
async fn the_step_turned_off_runs_the_call_and_asks_nothing() {
    let ran = run(
        "What is the capital of France?",
        &[CAPITAL_CALL, PARIS],
        named("get_capital"),
        |c| c.decide = false,
    )
    .await;
    assert_eq!(tools_started(&ran.events), ["read_file"]);
    assert!(decisions(&ran.events).is_empty());
    assert!(ran.fake.guesses().is_empty());
    assert_eq!(ran.outcome.progress.steps, 1);
}

#[tokio::test]
async fn the_decide_policy_off_runs_the_call_and_asks_nothing() {
    // The same as `--policy-off decide` (or its older spelling, `--no-decide`), by the policy's name (tests/policy_switches.rs has the others).
    let ran = run(
        "What is the capital of France?",
        &[CAPITAL_CALL, PARIS],
        named("get_capital"),
        |c| c.policies = Policies::all().without(Policy::Decide),
    )
    .await;
    assert_eq!(tools_started(&ran.events), ["read_file"]);
    assert!(ran.fake.guesses().is_empty());
}
