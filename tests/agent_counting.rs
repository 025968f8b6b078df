//! A constrained turn that counts instead of writing (issue 31 item 5): SmolLM2's thought
//! `The answer is: 2022-01-01 2022-01-02 …`, its `write_file(path=", 1, 2, 3, …`. The guard
//! ends the turn as it ends a repeated one, and the loop goes on as after a repetition: a thought
//! is closed after its first items and continued to its decision, an action is not run and the
//! model is told. A table of numbers in an argument runs. Through the real HTTP client against
//! the fake llama.cpp, which sends the grammar.

mod common;

use common::constrained::{Ran, run as run_task};
use pretty_assertions::assert_eq;

use tagloop::agent::Status;
use tagloop::llm::NoticeKind;

/// A constrained run of the lamps question, the fake replying `turns` in order.
async fn run(turns: Vec<String>) -> Ran {
    run_task("How many lamps were sold?", turns).await
}

const ANSWER: &str = "<thought>I know it.</thought>\n<final_answer>31</final_answer>";

#[tokio::test]
async fn a_thought_that_counts_is_closed_after_its_first_items_and_decides() {
    let mut dates = String::from("<thought>\nThe answer is:");
    for day in 1..=92 {
        dates.push_str(&format!(" 2022-01-{day:02}"));
    }
    let ran = run(vec![
        dates,
        "<action>echo(text=\"31\")</action>".into(),
        ANSWER.into(),
    ])
    .await;
    assert_eq!(ran.outcome.status, Status::Ok, "{:?}", ran.outcome.error);
    assert_eq!(
        ran.outcome.final_answer.as_ref().and_then(|v| v.as_str()),
        Some("31")
    );
    // The continued turn was one step: its action ran.
    assert_eq!(ran.outcome.progress.tools_used, ["echo"]);
    for kind in [NoticeKind::RepetitionCut, NoticeKind::ThoughtCut] {
        assert!(
            ran.notices.iter().any(|k| k == kind.as_str()),
            "{kind:?}: {:?}",
            ran.notices
        );
    }
    // The continuation holds the thought's first dates, closed, and nothing of the rest.
    let (last, _) = ran.sent(1);
    assert!(
        last.ends_with("The answer is: 2022-01-01 2022-01-02\n</thought>\n"),
        "{last:?}"
    );
    assert_eq!(last.matches("2022-01-").count(), 2, "{last:?}");
}

#[tokio::test]
async fn an_action_that_counts_is_not_run_and_the_model_is_told() {
    let count: Vec<String> = (1..=300).map(|n| n.to_string()).collect();
    let call = format!(
        "<thought>I echo it.</thought>\n<action>echo(text=\"{}\")</action>",
        count.join(", ")
    );
    let ran = run(vec![call, ANSWER.into()]).await;
    assert_eq!(ran.outcome.status, Status::Ok, "{:?}", ran.outcome.error);
    assert!(ran.outcome.progress.tools_used.is_empty());
    assert_eq!(ran.server.requests().len(), 2);
    let (last, all) = ran.sent(1);
    assert!(last.contains("Your turn was cut off"), "{last:?}");
    // The history keeps the call's first items only.
    assert!(
        all.contains("echo(text=\"1, 2, 3, 4, 5, 6, 7, 8, 9,"),
        "{all}"
    );
    assert!(!all.contains(", 12, "), "{all}");
}

#[tokio::test]
async fn a_table_of_numbers_in_an_argument_runs() {
    let rows: String = (0..200)
        .map(|i| format!("{i},{},{}\n", i * i, i % 7))
        .collect();
    let call = format!(
        "<thought>I echo the table.</thought>\n<action>echo(text=\"\"\"{rows}\"\"\")</action>"
    );
    let ran = run(vec![call, ANSWER.into()]).await;
    assert_eq!(ran.outcome.status, Status::Ok, "{:?}", ran.outcome.error);
    assert_eq!(ran.outcome.progress.tools_used, ["echo"]);
    assert!(
        !ran.notices
            .iter()
            .any(|k| k == NoticeKind::RepetitionCut.as_str()),
        "{:?}",
        ran.notices
    );
    let (last, _) = ran.sent(1);
    assert!(
        last.contains("199,39601,3"),
        "the whole table was echoed: {last:?}"
    );
}
