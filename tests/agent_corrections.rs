//! The agent loop's corrections and guards, driven by the scripted model (no network): a turn
//! without a decision, a truncated or repeating turn, a final answer its role refuses, typed
//! results, and calls repeated or cycling.

mod common;

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde_json::json;
use tagloop::agent::{Agent, Event, Role, Status};
use tagloop::llm::{DeltaSink, Finish, LlmError, Model, Role as MsgRole, TurnRequest, TurnResult};

use common::agent::{agent, collect_events, observations, script, turn_result, with_events};

/// A model that returns fixed texts as they are, like a server that ignores stops and a client
/// that does not enforce them (the loop must still cope).
struct Raw(Mutex<Vec<String>>);

impl Model for Raw {
    fn turn<'a>(
        &'a self,
        _r: &'a TurnRequest,
        _d: DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<TurnResult, LlmError>> {
        let text = self.0.lock().unwrap().remove(0);
        Box::pin(async move { Ok(turn_result(text, Finish::End)) })
    }
    fn describe(&self) -> String {
        "raw".into()
    }
}

#[tokio::test]
async fn a_turn_without_a_decision_gets_a_format_reminder_and_discarded_text_is_mentioned() {
    let model = Arc::new(Raw(Mutex::new(vec![
        "I think I should echo something.".into(),
        "<action>echo(text=\"a\")</action>\n<observation>made up</observation>".into(),
        "<final_answer>done</final_answer>".into(),
    ])));
    let o = agent(model, |_| {}).run("t").await;
    let obs = observations(&o.messages);
    assert!(
        obs[0].contains("neither an action nor a final answer"),
        "{}",
        obs[0]
    );
    assert!(
        obs[1].contains("echo: a") && obs[1].contains("was ignored"),
        "{}",
        obs[1]
    );
    // Discarded text never goes back to the model.
    assert!(
        !o.messages
            .iter()
            .any(|m| m.role == MsgRole::Assistant && m.content.contains("made up"))
    );
    assert_eq!(o.progress.steps, 2);
}

/// A model that always stops at the token limit.
struct Truncating;

impl Model for Truncating {
    fn turn<'a>(
        &'a self,
        _r: &'a TurnRequest,
        _d: DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<TurnResult, LlmError>> {
        Box::pin(async {
            Ok(turn_result(
                "<thought>a very long thought that",
                Finish::Length,
            ))
        })
    }
    fn describe(&self) -> String {
        "truncating".into()
    }
}

#[tokio::test]
async fn a_truncated_turn_is_not_a_syntax_error() {
    let o = agent(Arc::new(Truncating), |c| c.max_steps = 2)
        .run("t")
        .await;
    let obs = observations(&o.messages);
    assert!(
        obs[0].contains("cut off by the token limit") && obs[0].contains("not a format error"),
        "{}",
        obs[0]
    );
    assert_eq!(o.status, Status::MaxSteps);
    assert_eq!(o.final_answer, None);
}

#[tokio::test]
async fn a_turn_that_repeats_itself_is_cut_and_nothing_in_it_runs() {
    // A model stuck in a loop inside an action: the guard cuts the turn long before the end,
    // the half-written call is not run, and the model is told what happened.
    let looping = format!(
        "<thought>Echo it.</thought>\n<action>echo(text=\"{}",
        "all work and no play. ".repeat(200)
    );
    let (sink, events) = collect_events();
    let o = agent(
        script(&[
            &looping,
            "<thought>Answer.</thought>\n<final_answer>done</final_answer>",
        ]),
        |_| {},
    )
    .run_with("t", with_events(sink))
    .await;
    assert_eq!(o.status, Status::Ok, "{:?}", o.error);
    assert_eq!(o.progress.steps, 1);
    let events = events.lock().unwrap();
    let finishes: Vec<&Finish> = events
        .iter()
        .filter_map(|e| match e {
            Event::TurnFinished { finish, .. } => Some(finish),
            _ => None,
        })
        .collect();
    assert_eq!(finishes[0], &Finish::Repeated);
    assert!(
        !events.iter().any(|e| matches!(e, Event::Action { .. })),
        "the cut action must not run"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Correction { kind, .. } if kind == "repetition"))
    );
    // The history keeps the turn up to the first repetition, not 200 copies.
    let kept = &o.messages[2].content;
    assert!(kept.len() < looping.len() / 4, "{kept}");
    assert!(observations(&o.messages)[0].contains("kept repeating"));
}

#[tokio::test]
async fn the_guard_can_be_turned_off() {
    let looping = format!(
        "<thought>Echo it.</thought>\n<action>echo(text=\"{}\")</action>",
        "all work and no play. ".repeat(200)
    );
    let o = agent(
        script(&[
            &looping,
            "<thought>Answer.</thought>\n<final_answer>done</final_answer>",
        ]),
        |c| c.keep_repetitions = true,
    )
    .run("t")
    .await;
    assert_eq!(o.status, Status::Ok);
    let obs = &observations(&o.messages)[0];
    assert!(
        obs.contains("echo: all work and no play. all work"),
        "{obs}"
    );
}

fn schema_agent(model: Arc<dyn Model>) -> Agent {
    let role = Role::new("geo", "Answer with the city.")
        .with_output_schema(json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string", "minLength": 2}}}))
        .unwrap();
    Agent::builder(model).role(role).build().unwrap()
}

#[tokio::test]
async fn an_invalid_final_answer_is_corrected() {
    let model = script(&[
        "<final_answer></final_answer>",
        "<final_answer>{\"city\": 3}</final_answer>",
        "<final_answer>```json\n{\"city\": \"Paris\"}\n```</final_answer>",
    ]);
    let o = schema_agent(model).run("where").await;
    assert_eq!(o.status, Status::Ok);
    assert_eq!(o.final_answer, Some(json!({"city": "Paris"})));
    let obs = observations(&o.messages);
    assert!(obs[0].contains("empty"), "{}", obs[0]);
    assert!(
        obs[1].contains("/city: 3 is not of type \"string\""),
        "{}",
        obs[1]
    );
    assert_eq!(o.progress.steps, 0, "refused final answers are not steps");
}

#[tokio::test]
async fn three_refusals_in_a_row_end_the_run() {
    let model = script(&[
        "<final_answer>nope</final_answer>",
        "<final_answer>{}</final_answer>",
        "<final_answer>{\"city\": \"\"}</final_answer>",
    ]);
    let o = schema_agent(model).run("where").await;
    assert_eq!(o.status, Status::InvalidFinal);
    assert_eq!(o.final_answer, None);
    assert!(o.error.unwrap().contains("3 final answers in a row"));
}

#[tokio::test]
async fn typed_results_and_single_turn_structured_calls() {
    #[derive(Debug, serde::Deserialize, schemars::JsonSchema, PartialEq)]
    struct Plan {
        steps: Vec<String>,
    }
    let model = script(&["<final_answer>{\"steps\": [\"a\", \"b\"]}</final_answer>"]);
    let agent = Agent::builder(model)
        .role(Role::for_type::<Plan>("planner", "Plan.").unwrap())
        .build()
        .unwrap();
    assert!(agent.system_prompt().contains("You have no tools"));
    let o = agent.run_as::<Plan>("plan it").await.unwrap();
    assert_eq!(
        o.final_answer,
        Some(Plan {
            steps: vec!["a".into(), "b".into()]
        })
    );
    assert_eq!((o.progress.steps, o.progress.llm_calls), (0, 1));
}

#[tokio::test]
async fn the_third_identical_call_is_not_run_and_a_fourth_ends_the_run() {
    let call = "<action>add(a=1, b=2)</action>";
    let o = agent(script(&[call, call, call, call]), |_| {})
        .run("t")
        .await;
    assert_eq!(o.status, Status::LoopDetected);
    let obs = observations(&o.messages);
    assert_eq!(obs.len(), 3);
    assert!(
        obs[2].contains("third time in a row")
            && obs[2].contains("Its result was:\nadd(a=1, b=2) returned 1 line:\n3"),
        "{}",
        obs[2]
    );
}

#[tokio::test]
async fn an_abab_cycle_is_caught() {
    let a = "<action>add(a=1, b=2)</action>";
    let b = "<action>echo(text=\"x\")</action>";
    let o = agent(
        script(&[a, b, a, b, "<final_answer>ok</final_answer>"]),
        |_| {},
    )
    .run("t")
    .await;
    let obs = observations(&o.messages);
    assert!(obs[3].contains("alternating"), "{}", obs[3]);
    assert_eq!(
        o.status,
        Status::Ok,
        "doing something else after the warning is fine"
    );
}
