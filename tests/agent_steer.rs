//! What the runtime adds to a result to keep a run on its question, driven by the scripted model:
//! the files the question names that no call has used yet (src/agent/named.rs), and the line
//! before a result the same call gave in the step before (src/agent/loopguard.rs).

mod common;

use std::sync::Arc;

use common::agent::{PathArgs, observed_run};
use tagloop::agent::Status;
use tagloop::tools::{Registry, tool_fn};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct SearchArgs {
    /// What to look for.
    pattern: String,
}

fn tools() -> Registry {
    let mut r = Registry::new();
    r.add(Arc::new(tool_fn(
        "read",
        "A file's one line.",
        |a: PathArgs| async move { Ok(format!("{}: 7", a.path)) },
    )));
    r.add(Arc::new(tool_fn(
        "search",
        "Finds nothing.",
        |a: SearchArgs| async move { Ok(format!("no matches for /{}/", a.pattern)) },
    )));
    r
}

/// The observations a run of `task` with `turns` sent.
async fn observations(task: &str, turns: &[&str]) -> (Status, Vec<String>) {
    observed_run(tools(), task, turns, 8).await
}

#[tokio::test]
async fn each_result_names_the_files_of_the_question_no_call_has_used_yet() {
    let (status, seen) = observations(
        "The ledger folder holds week1.txt to week3.txt. Add up their numbers into total.txt.",
        &[
            "<action>read(path=\"ledger/week1.txt\")</action>",
            // A search for a name is not a use of it.
            "<action>search(pattern=\"week2.txt\")</action>",
            "<action>read(path=\"ledger/week2.txt\")</action>",
            "<action>read(path=\"ledger/week3.txt\")</action>",
            "<action>read(path=\"total.txt\")</action>",
            "<final_answer>21</final_answer>",
        ],
    )
    .await;
    assert_eq!(status, Status::Ok);
    // The notice takes the decision sentence's place, right before the steps left.
    let notice = |names: &str| {
        let them = if names.contains(' ') { "them" } else { "it" };
        format!(
            "The question also names {names}, which no call has used yet: call a tool on {them} before you give your final answer.\n\n["
        )
    };
    assert!(
        seen[0].contains(&notice("week2.txt, week3.txt and total.txt")),
        "{}",
        seen[0]
    );
    assert!(
        seen[1].contains(&notice("week2.txt, week3.txt and total.txt")),
        "{}",
        seen[1]
    );
    assert!(
        seen[2].contains(&notice("week3.txt and total.txt")),
        "{}",
        seen[2]
    );
    assert!(seen[3].contains(&notice("total.txt")), "{}", seen[3]);
    assert!(!seen[4].contains("The question also names"), "{}", seen[4]);
    assert!(seen[4].contains("If the results so far"), "{}", seen[4]);
}

#[tokio::test]
async fn a_question_without_file_names_gets_no_notice() {
    let (_, seen) = observations(
        "What is the capital of Peru, e.g. in 2.5 words?",
        &[
            "<action>read(path=\"a.txt\")</action>",
            "<final_answer>Lima</final_answer>",
        ],
    )
    .await;
    assert!(!seen[0].contains("The question also names"), "{}", seen[0]);
}

#[tokio::test]
async fn the_same_call_with_the_same_result_again_is_said_to_change_nothing() {
    let (status, seen) = observations(
        "Which port does the setup mention?",
        &[
            "<action>search(pattern=\"port\")</action>",
            "<action>search(pattern=\"port\")</action>",
            "<action>search(pattern=\"PORT\")</action>",
            "<final_answer>none</final_answer>",
        ],
    )
    .await;
    assert_eq!(status, Status::Ok);
    let steer = "<observation>\nYou made exactly this call in your last step and it returned the same again: calling it once more will not change it. Use this result, call a different tool, or give your final answer.\nsearch(pattern=\"port\") returned 1 line:\n";
    assert!(!seen[0].contains("You made exactly"), "{}", seen[0]);
    assert!(seen[1].starts_with(steer), "{}", seen[1]);
    // A different call is a fresh start.
    assert!(!seen[2].contains("You made exactly"), "{}", seen[2]);
}
