//! What the runtime adds to a result to keep a run on its question, driven by the scripted model:
//! the files the question names that no call has used yet (src/policy/named.rs), and an answer
//! refused while the question names files no call has used (src/policy/named_refusal.rs); and
//! what it no longer adds: a note on a call that gave what it gave before (the deleted
//! `same-result`), so a repeat runs as any call and a cycle longer than two is left to the
//! step limit (src/policy/loopguard/).

mod common;

use common::agent::{observed_run, read_and_search};
use tagloop::agent::{Agent, AgentConfig, Status};
use tagloop::llm::Role as MsgRole;

/// The observations a run of `task` with `turns` sent.
async fn observations(task: &str, turns: &[&str]) -> (Status, Vec<String>) {
    observed_run(read_and_search(), task, turns, 8).await
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
    // The notice comes after the result, right before the steps left.
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
    // Once every named file was used, the result ends with the steps left, nothing between.
    assert!(
        seen[4].ends_with("total.txt: 7\n\n[3 steps left]\n</observation>"),
        "{}",
        seen[4]
    );
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
async fn the_same_call_again_runs_as_any_call_without_a_note() {
    let (status, seen) = observations(
        "Which port does the setup mention?",
        &[
            "<action>search(pattern=\"port\")</action>",
            "<action>search(pattern=\"port\")</action>",
            "<final_answer>none</final_answer>",
        ],
    )
    .await;
    assert_eq!(status, Status::Ok);
    assert_eq!(seen[0], seen[1].replace("[6 steps left]", "[7 steps left]"));
    assert!(
        seen[1].starts_with("<observation>\nsearch(pattern=\"port\") returned 1 line:\n"),
        "{}",
        seen[1]
    );
}

/// Four reads, then the same four again and again: the 1.5B Qwen read the four week files and
/// began to read them all once more, a cycle the A/A/A and A/B/A/B rules do not see.
const CYCLE: [&str; 4] = [
    "<action>read(path=\"ledger/week1.txt\")</action>",
    "<action>read(path=\"ledger/week2.txt\")</action>",
    "<action>read(path=\"ledger/week3.txt\")</action>",
    "<action>read(path=\"ledger/week4.txt\")</action>",
];

#[tokio::test]
async fn a_cycle_of_four_reads_is_left_to_the_step_limit() {
    let turns: Vec<&str> = CYCLE.iter().copied().cycle().take(12).collect();
    let agent = Agent::builder(common::script::model(&turns))
        .tools(read_and_search())
        .config(AgentConfig {
            max_steps: 10,
            ..AgentConfig::default()
        })
        .build()
        .expect("agent builds");
    let o = agent.run("Which week had the most visitors?").await;
    // Neither A/A/A nor A/B/A/B: every read runs, and the last turn, which may only answer,
    // reads again.
    assert_eq!(o.status, Status::MaxSteps, "{:?}", o.error);
    assert_eq!(o.progress.steps, 10);
}

/// The run's answer and the observations it sent.
async fn answered(task: &str, turns: &[&str]) -> (Status, Option<serde_json::Value>, Vec<String>) {
    let agent = Agent::builder(common::script::model(turns))
        .tools(read_and_search())
        .build()
        .expect("agent builds");
    let o = agent.run(task).await;
    let seen = o
        .messages
        .iter()
        .skip(2)
        .filter(|m| m.role == MsgRole::User)
        .map(|m| m.content.clone())
        .collect();
    (o.status, o.final_answer, seen)
}

#[tokio::test]
async fn an_answer_before_every_named_file_was_used_is_refused_with_their_names() {
    let (status, answer, seen) = answered(
        "Compare ledger/week2.txt and ledger/week4.txt: which sold more chairs?",
        &[
            "<action>read(path=\"ledger/week2.txt\")</action>",
            // The 1.5B Qwen's answer after one read: the second number made up.
            "<final_answer>week2: 7, week4: 7</final_answer>",
            "<action>read(path=\"ledger/week4.txt\")</action>",
            "<final_answer>the same: 7 and 7</final_answer>",
        ],
    )
    .await;
    assert_eq!(status, Status::Ok);
    assert_eq!(answer, Some(serde_json::json!("the same: 7 and 7")));
    assert!(
        seen[1].contains("Your answer was not accepted yet: it came before any call used all the files the question names. The question also names ledger/week4.txt, which no call has used yet: call a tool on it before you give your final answer."),
        "{}",
        seen[1]
    );
    assert_eq!(seen.len(), 3, "{seen:?}");
}

#[tokio::test]
async fn refusals_for_named_files_stop_before_the_run_would_end_and_are_bounded() {
    // A named file no call needs: refused twice in a row, the third answer is taken (the
    // default ends a run at three refusals in a row).
    let (status, answer, seen) = answered(
        "What does a .txt file such as notes.txt usually hold?",
        &[
            "<final_answer>text</final_answer>",
            "<final_answer>text again</final_answer>",
            "<final_answer>plain text</final_answer>",
        ],
    )
    .await;
    assert_eq!(status, Status::Ok);
    assert_eq!(answer, Some(serde_json::json!("plain text")));
    assert_eq!(seen.len(), 2, "{seen:?}");
    // With calls between (each a new one: the loop guard stays out of it), at most four
    // answers are refused in a run.
    let calls: Vec<String> = (1..=5)
        .map(|i| format!("<action>read(path=\"other{i}.txt\")</action>"))
        .collect();
    let mut turns = Vec::new();
    for call in &calls {
        turns.push(call.as_str());
        turns.push("<final_answer>done</final_answer>");
    }
    let (status, answer, seen) = answered("Sum a1.txt and a2.txt.", &turns).await;
    assert_eq!(status, Status::Ok);
    assert_eq!(answer, Some(serde_json::json!("done")));
    let refused = seen
        .iter()
        .filter(|o| o.contains("not accepted yet"))
        .count();
    assert_eq!(refused, 4, "{seen:?}");
}

#[tokio::test]
async fn the_answer_after_a_refused_call_is_not_refused_for_names() {
    // The 0.5B and the 1.5B Qwen read the same file three times; the third read was refused and
    // the turn after it could only answer. Refusing that answer for a file no call had used
    // sent them back to the same read, refused again, until the step limit.
    let (status, answer, seen) = answered(
        "Read week1.txt and week2.txt, then write summary.txt.",
        &[
            "<action>read(path=\"week1.txt\")</action>",
            "<action>read(path=\"week1.txt\")</action>",
            "<action>read(path=\"week1.txt\")</action>",
            "<final_answer>22</final_answer>",
            "<action>read(path=\"week1.txt\")</action>",
        ],
    )
    .await;
    assert_eq!(status, Status::Ok);
    assert_eq!(answer, Some(serde_json::json!("22")));
    assert!(seen[2].contains("it was not run again"), "{}", seen[2]);
    assert!(
        seen.iter().all(|o| !o.contains("not accepted yet")),
        "{seen:?}"
    );
}
