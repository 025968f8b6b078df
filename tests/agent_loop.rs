//! The agent loop, driven by the scripted model (no network): every behaviour of docs/protocol.md
//! §1.6 and issue 4, one test each — steps, observations, the step limit, events, the transcript,
//! resuming. What the loop does with turns it cannot take as they are is in agent_corrections.rs.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tagloop::agent::{Agent, Event, Resume, RunOptions, Status};
use tagloop::llm::Api;
use tagloop::llm::{DeltaSink, Finish, LlmError, Model, Prompt, TurnRequest, TurnResult, Usage};
use tagloop::tools::tool_fn;

use common::agent::{
    Nothing, agent, collect_events, observations, script, tools, turn_result, with_events,
    with_transcript,
};

#[tokio::test]
async fn a_tool_call_then_a_final_answer() {
    let model = script(&[
        "<thought>Use echo.</thought>\n<action>echo(text=\"hi\")</action>",
        "<thought>Done.</thought>\n<final_answer>hi back</final_answer>",
    ]);
    let o = agent(model, |_| {}).run("say hi").await;
    assert_eq!(o.status, Status::Ok);
    assert_eq!(o.final_answer, Some(json!("hi back")));
    assert_eq!((o.progress.steps, o.progress.llm_calls), (1, 2));
    assert_eq!(o.progress.tools_used, vec!["echo".to_string()]);
    assert!(o.progress.usage.prompt_tokens > 0 && o.progress.usage.completion_tokens > 0);
    // The closing tag that the stop removed is back in the history.
    assert_eq!(
        o.messages[2].content,
        "<thought>Use echo.</thought>\n<action>echo(text=\"hi\")</action>"
    );
    assert_eq!(
        observations(&o.messages),
        vec![format!(
            "<observation>\necho(text=\"hi\") returned 1 line:\necho: hi\n\n[9 steps left]\n</observation>"
        )]
    );
    assert!(
        o.messages[1]
            .content
            .contains("<question>\nsay hi\n</question>")
    );
}

#[tokio::test]
async fn a_stop_inside_an_open_string_continues_the_same_turn() {
    // The server cuts at the first `</action>`, which is inside the string: the loop puts the stop
    // back and the model continues (the next scripted turn is the continuation).
    let model = script(&[
        "<action>echo(text=\"a </action> b\")</action>",
        " b\")</action>",
        "<final_answer>ok</final_answer>",
    ]);
    let o = agent(model, |_| {}).run("t").await;
    assert_eq!(o.status, Status::Ok);
    // Inside an observation a protocol tag is neutralised (docs/protocol.md §1.4).
    assert_eq!(
        observations(&o.messages)[0],
        format!(
            "<observation>\necho(text=\"a &lt;/action> b\") returned 1 line:\necho: a &lt;/action> b\n\n[9 steps left]\n</observation>"
        )
    );
    assert_eq!(
        o.progress.llm_calls, 2,
        "a continuation is not a new model call"
    );
    assert_eq!(o.progress.steps, 1);
}

#[tokio::test]
async fn completions_mode_continues_with_the_prefix() {
    let model = script(&[
        "I will echo.</thought>\n<action>echo(text=\"x</action>",
        "y\")</action>",
        "Done.</thought>\n<final_answer>z</final_answer>",
    ]);
    let o = agent(model, |c| c.api = Api::Completions).run("t").await;
    assert_eq!(o.status, Status::Ok, "{:?}", o.error);
    assert!(
        observations(&o.messages)[0].contains("echo: x&lt;/action>y"),
        "{:?}",
        observations(&o.messages)
    );
    assert_eq!(
        o.messages[2].content,
        "<thought>I will echo.</thought>\n<action>echo(text=\"x</action>y\")</action>"
    );
}

#[tokio::test]
async fn parse_errors_unknown_tools_and_bad_arguments_are_observations() {
    let model = script(&[
        "<action>echo(text=)</action>",
        "<action>ecko(text=\"x\")</action>",
        "<action>add(a=1, c=2)</action>",
        "<action>add(a=\"x\", b=2)</action>",
        "<final_answer>gave up</final_answer>",
    ]);
    let o = agent(model, |_| {}).run("t").await;
    assert_eq!(o.status, Status::Ok);
    assert_eq!(o.progress.steps, 4);
    assert!(
        o.progress.tools_used.is_empty(),
        "no tool ran: {:?}",
        o.progress.tools_used
    );
    let obs = observations(&o.messages);
    assert!(
        obs[0].contains("could not be parsed") && obs[0].contains("at byte"),
        "{}",
        obs[0]
    );
    assert!(
        obs[1].contains("no tool named `ecko`") && obs[1].contains("Did you mean `echo`?"),
        "{}",
        obs[1]
    );
    assert!(
        obs[1].contains("The tools are: echo, add, fail, slow"),
        "{}",
        obs[1]
    );
    assert!(
        obs[2].contains("`add`") && obs[2].contains('c'),
        "{}",
        obs[2]
    );
    assert!(
        obs[3].contains("`add`") && obs[3].contains('a'),
        "{}",
        obs[3]
    );
}

#[tokio::test]
async fn tool_errors_and_timeouts_are_observations() {
    let model = script(&[
        "<action>fail()</action>",
        "<action>slow()</action>",
        "<final_answer>x</final_answer>",
    ]);
    let o = agent(model, |_| {}).run("t").await;
    let obs = observations(&o.messages);
    assert!(
        obs[0].contains("Error from fail: disk on fire"),
        "{}",
        obs[0]
    );
    assert!(obs[1].contains("Error from slow: timed out"), "{}", obs[1]);
    assert_eq!(o.status, Status::Ok);
}

#[tokio::test]
async fn the_step_limit_asks_once_more_for_a_final_answer() {
    let call = |n: u32| format!("<action>add(a={n}, b=1)</action>");
    let turns = [
        call(1),
        call(2),
        "<final_answer>best effort</final_answer>".to_string(),
    ];
    let turns: Vec<&str> = turns.iter().map(String::as_str).collect();
    let (sink, events) = collect_events();
    let o = agent(script(&turns), |c| c.max_steps = 2)
        .run_with("t", with_events(sink))
        .await;
    assert_eq!(o.status, Status::MaxSteps);
    assert_eq!(o.final_answer, Some(json!("best effort")));
    let obs = observations(&o.messages);
    assert!(obs[0].contains("[1 step left]"), "{}", obs[0]);
    assert!(obs[1].contains("You have used all 2 steps"), "{}", obs[1]);
    let finals: Vec<bool> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| {
            if let Event::TurnStarted { final_only, .. } = e {
                Some(*final_only)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(finals, vec![false, false, true]);

    // An action in the last-chance turn ends the run without a final answer.
    let turns = [call(1), call(2)];
    let turns: Vec<&str> = turns.iter().map(String::as_str).collect();
    let mut t = turns.clone();
    t.push("<action>add(a=9, b=9)</action>");
    let o = agent(script(&t), |c| c.max_steps = 2).run("t").await;
    assert_eq!((o.status, o.final_answer), (Status::MaxSteps, None));
    assert_eq!(o.progress.tools_used, vec!["add".to_string()]);
}

#[tokio::test]
async fn a_model_failure_is_status_error() {
    let o = agent(script(&["<action>add(a=1, b=2)</action>"]), |_| {})
        .run("t")
        .await;
    assert_eq!(o.status, Status::Error);
    assert!(o.error.unwrap().contains("turn"), "the script ran out");
}

#[tokio::test]
async fn events_arrive_in_order() {
    let (sink, events) = collect_events();
    let model = script(&[
        "<thought>T</thought><action>echo(text=\"x\")</action>",
        "<final_answer>F</final_answer>",
    ]);
    agent(model, |_| {}).run_with("t", with_events(sink)).await;
    let kinds: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .map(|e| {
            serde_json::to_value(e).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .filter(|k| k != "text_delta")
        .collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "message",
            "message",
            "turn_started",
            "turn_finished",
            "message",
            "thought",
            "action",
            "tool_started",
            "tool_finished",
            "observation",
            "message",
            "step_completed",
            "turn_started",
            "turn_finished",
            "message",
            "final",
            "finished"
        ]
    );
}

#[tokio::test]
async fn a_run_cut_short_resumes_from_its_last_complete_step() {
    let turns = [
        "<action>add(a=1, b=2)</action>",
        "<action>echo(text=\"three\")</action>",
        "<final_answer>3</final_answer>",
    ];
    let dir = tempfile::tempdir().unwrap();
    let full = agent(script(&turns), |_| {})
        .run_with("t", with_transcript(dir.path()))
        .await;
    assert_eq!(full.status, Status::Ok);
    let records = tagloop::session::load(&dir.path().join("s.jsonl"))
        .unwrap()
        .records;
    // Cut the transcript just before the second step completed (a kill mid-step).
    let cut = records
        .iter()
        .rposition(|r| r["type"] == "step_completed")
        .unwrap();
    let resume = Resume::from_records(&records[..cut]).unwrap();
    assert_eq!((resume.progress.steps, resume.requests), (1, 1));
    let model = common::script::model_from(&turns, resume.requests as usize);
    let resumed = agent(model, |_| {})
        .run_with(
            "t",
            RunOptions {
                resume: Some(resume),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(resumed.status, Status::Ok);
    assert_eq!(
        (resumed.progress.steps, resumed.progress.llm_calls),
        (full.progress.steps, full.progress.llm_calls)
    );
    assert_eq!(resumed.progress.tools_used, full.progress.tools_used);
    assert_eq!(resumed.messages, full.messages, "no step lost or repeated");
}

#[tokio::test]
async fn the_prompt_is_stable_and_lists_tools_in_order() {
    let a = agent(script(&[]), |_| {});
    let b = agent(script(&[]), |_| {});
    assert_eq!(a.system_prompt(), b.system_prompt());
    let p = a.system_prompt();
    let pos = |s: &str| p.find(s).unwrap_or_else(|| panic!("{s} missing"));
    assert!(pos("## echo(text)") < pos("## add(a, b)") && pos("## add(a, b)") < pos("## fail()"));
    assert!(p.contains("- text (string, required): The text to echo."));
    match a.first_prompt("the task", &[]).unwrap() {
        Prompt::Chat(m) => assert_eq!(m.len(), 2),
        Prompt::Text(_) => panic!("chat expected"),
    }
    let c = agent(script(&[]), |c| c.api = Api::Completions);
    let Prompt::Text(text) = c.first_prompt("the task", &[]).unwrap() else {
        panic!()
    };
    assert!(text.ends_with("</question>\n<thought>"), "{text:?}");
}

#[tokio::test]
async fn the_request_carries_the_stop_strings() {
    struct Spy(Mutex<Vec<Vec<String>>>);
    impl Model for Spy {
        fn turn<'a>(
            &'a self,
            r: &'a TurnRequest,
            _d: DeltaSink<'a>,
        ) -> BoxFuture<'a, Result<TurnResult, LlmError>> {
            self.0.lock().unwrap().push(r.stop.clone());
            Box::pin(async { Ok(turn_result("<final_answer>x</final_answer>", Finish::End)) })
        }
        fn describe(&self) -> String {
            "spy".into()
        }
    }
    let spy = Arc::new(Spy(Mutex::new(vec![])));
    let o = agent(spy.clone(), |_| {}).run("t").await;
    assert_eq!(o.status, Status::Ok);
    assert_eq!(
        spy.0.lock().unwrap()[0],
        vec![
            "</action>",
            "<observation>",
            "</final_answer>",
            "</tool_call>",
            "</function_calls>"
        ]
    );
}

#[test]
fn outcome_serialises_to_the_spec_shape() {
    let o = tagloop::agent::Outcome::<Value> {
        status: Status::MaxSteps,
        final_answer: None,
        progress: tagloop::agent::Progress {
            steps: 4,
            llm_calls: 5,
            tools_used: vec!["read_file".into()],
            usage: Usage {
                prompt_tokens: 1,
                completion_tokens: 2,
            },
        },
        session: Some("s".into()),
        error: None,
        messages: vec![],
    };
    assert_eq!(
        serde_json::to_value(&o).unwrap(),
        json!({"status": "max_steps", "final": null, "steps": 4, "llm_calls": 5, "tools_used": ["read_file"],
               "usage": {"prompt_tokens": 1, "completion_tokens": 2}, "session": "s", "error": null})
    );
    // The fields keep the contract's order (the progress is flattened in place).
    assert!(
        serde_json::to_string(&o).unwrap().starts_with(
            r#"{"status":"max_steps","final":null,"steps":4,"llm_calls":5,"tools_used""#
        )
    );
}

#[tokio::test]
async fn the_transcript_is_on_disk_before_every_wait() {
    // A tool that waits, then reads the transcript: everything up to its own start is there.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let seen = path.clone();
    let mut registry = tools();
    registry.add(Arc::new(tool_fn(
        "peek",
        "Wait a moment, then read the transcript.",
        move |_: Nothing| {
            let seen = seen.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let text = std::fs::read_to_string(&seen).unwrap_or_default();
                let last = text
                    .lines()
                    .last()
                    .and_then(|l| serde_json::from_str::<Value>(l).ok())
                    .map(|v| v["type"].to_string())
                    .unwrap_or_default();
                Ok(format!("records {} last {last}", text.lines().count()))
            }
        },
    )));
    let agent = Agent::builder(script(&[
        "<action>add(a=1, b=2)</action>",
        "<action>peek()</action>",
        "<final_answer>done</final_answer>",
    ]))
    .tools(registry)
    .build()
    .expect("agent builds");
    let o = agent.run_with("t", with_transcript(dir.path())).await;
    assert_eq!(o.status, Status::Ok);
    let obs = observations(&o.messages);
    assert!(
        obs[1].contains("records ") && obs[1].contains("last \"tool_started\""),
        "{}",
        obs[1]
    );
    // The whole run is there at the end, the quick `add` call's records included.
    let records = tagloop::session::load(&path).unwrap().records;
    let kinds: Vec<String> = records
        .iter()
        .map(|r| {
            serde_json::to_value(r).unwrap()["type"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_eq!(kinds.iter().filter(|k| *k == "tool_finished").count(), 2);
    assert_eq!(kinds.last().map(String::as_str), Some("finished"));
}
