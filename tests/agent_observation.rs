//! A tool's observation (src/agent/observed.rs), driven by the scripted model: the header names
//! the call and counts the lines it returned, the tool's text follows as it is, and the decision
//! sentence closes it; a tool's error keeps its own form.

mod common;

use std::sync::Arc;

use pretty_assertions::assert_eq;

use common::agent::{PathArgs, observed_run};
use tagloop::agent::Status;
use tagloop::tools::{Registry, ToolError, tool_fn};

fn tools() -> Registry {
    let mut r = Registry::new();
    r.add(Arc::new(tool_fn(
        "lines",
        "Three lines, or none for empty.txt.",
        |a: PathArgs| async move {
            Ok(if a.path == "empty.txt" {
                String::new()
            } else {
                "alpha\nbeta\ngamma\n".to_string()
            })
        },
    )));
    r.add(Arc::new(tool_fn(
        "broken",
        "Always fails.",
        |_: PathArgs| async move { Err::<String, _>(ToolError::Failed("no such file".into())) },
    )));
    r
}

/// The observations a run with `turns` sent, after the task.
async fn observations(turns: &[&str], max_steps: u32) -> (Status, Vec<String>) {
    observed_run(tools(), "t", turns, max_steps).await
}

#[tokio::test]
async fn a_result_is_headed_by_its_call_and_line_count_and_closed_by_the_steps_left() {
    let (status, seen) = observations(
        &[
            "<thought>Read.</thought>\n<action>lines(path=\"a.txt\")</action>",
            "<final_answer>3</final_answer>",
        ],
        4,
    )
    .await;
    assert_eq!(status, Status::Ok);
    assert_eq!(
        seen,
        vec![format!(
            "<observation>\nlines(path=\"a.txt\") returned 3 lines:\nalpha\nbeta\ngamma\n\n[3 steps left]\n</observation>"
        )]
    );
}

#[tokio::test]
async fn an_empty_result_is_said_to_be_empty() {
    let (_, seen) = observations(
        &[
            "<action>lines(path=\"empty.txt\")</action>",
            "<final_answer>none</final_answer>",
        ],
        4,
    )
    .await;
    assert_eq!(
        seen[0],
        format!(
            "<observation>\nlines(path=\"empty.txt\") returned nothing.\n\n[3 steps left]\n</observation>"
        )
    );
}

#[tokio::test]
async fn a_tool_error_has_no_header() {
    let (_, seen) = observations(
        &[
            "<action>broken(path=\"a.txt\")</action>",
            "<final_answer>gave up</final_answer>",
        ],
        4,
    )
    .await;
    assert!(
        seen[0].starts_with("<observation>\nError from broken: "),
        "{}",
        seen[0]
    );
    assert!(!seen[0].contains("returned"), "{}", seen[0]);
}

#[tokio::test]
async fn the_step_that_reaches_the_limit_gets_the_limit_notice() {
    let (status, seen) = observations(
        &[
            "<action>lines(path=\"a.txt\")</action>",
            "<final_answer>3</final_answer>",
        ],
        1,
    )
    .await;
    assert_eq!(status, Status::MaxSteps);
    assert!(
        seen[0].contains("lines(path=\"a.txt\") returned 3 lines:\nalpha"),
        "{}",
        seen[0]
    );
    assert!(seen[0].contains("You have used all 1 steps"), "{}", seen[0]);
}
