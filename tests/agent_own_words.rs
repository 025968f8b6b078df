//! A constrained answer that goes on with the runtime's own notes (issue 31 item 5: gemma's
//! answer `The answer is 4.` followed by the loop notice it had read, then the same notice again
//! with its own count, to the 1,024-token budget) is cut where the echo begins and the answer
//! before it taken; an answer that quotes a tool's long line is not cut. Through the real HTTP
//! client against the fake llama.cpp, which sends the grammar.

mod common;

use common::agent::{NO_DECISION, UNDECIDED};
use common::constrained::{Ran, run as run_task};
use pretty_assertions::assert_eq;

use tagloop::agent::Status;
use tagloop::llm::NoticeKind;

/// The call each run begins with (then a turn with no decision, so that the runtime corrects
/// it with a note).
const ECHO: &str = "<action>echo(text=\"hi\")</action>";

/// A constrained run of one question, the fake replying `turns` in order.
async fn run(turns: Vec<String>) -> Ran {
    run_task("What does the tool say?", turns).await
}

#[tokio::test]
async fn an_answer_that_goes_on_with_the_runtimes_notes_is_cut_before_them() {
    // A call, then a turn with no decision: the correction is the runtime's note, which the
    // answer then says again.
    let echoed = format!(
        "<thought>I know.</thought>\n<final_answer>The tool says hi.\n<comment>\n{NO_DECISION}\n[1 step left]\n</comment>\n<comment>\n{NO_DECISION}\n"
    );
    let ran = run(vec![ECHO.into(), UNDECIDED.into(), echoed]).await;
    assert_eq!(ran.outcome.status, Status::Ok, "{:?}", ran.outcome.error);
    assert_eq!(ran.answer(), Some("The tool says hi."));
    assert_eq!(ran.server.requests().len(), 3);
    assert!(ran.told(NoticeKind::RepetitionCut), "the cut is told");
}

#[tokio::test]
async fn an_answer_that_quotes_a_tools_long_line_is_whole() {
    let line = "The quick brown fox jumps over the lazy dog, twice over.";
    let quoted =
        format!("<thought>I know.</thought>\n<final_answer>It says: echo: {line}</final_answer>");
    let ran = run(vec![
        format!("<action>echo(text=\"{line}\")</action>"),
        quoted,
    ])
    .await;
    assert_eq!(ran.outcome.status, Status::Ok, "{:?}", ran.outcome.error);
    assert_eq!(
        ran.answer(),
        Some(format!("It says: echo: {line}").as_str())
    );
    assert!(!ran.told(NoticeKind::RepetitionCut));
}

/// A thought may restate a note: that is how a model takes it up (the 0.5B Qwen's `The question
/// names summary.txt, which no call has used yet: call a tool on it…`, then the call).
#[tokio::test]
async fn a_thought_that_restates_a_note_is_whole() {
    let restated = format!(
        "<thought>{NO_DECISION} So I answer.</thought>\n<final_answer>The tool says hi.</final_answer>"
    );
    let ran = run(vec![ECHO.into(), UNDECIDED.into(), restated]).await;
    assert_eq!(ran.outcome.status, Status::Ok, "{:?}", ran.outcome.error);
    assert_eq!(ran.answer(), Some("The tool says hi."));
    assert_eq!(ran.server.requests().len(), 3);
    assert!(!ran.told(NoticeKind::RepetitionCut));
}
