//! A constrained call whose argument says one sentence again and again (issue 31 item 5:
//! SmolLM2's `write_file` content `This is a note from the user. This is a note from the user. …`
//! until the ordinary guard cut it after 150–210 tokens) is cut by the strict guard after three
//! copies and not run, when the run was never given that sentence; a call that writes out what
//! the task asked for, copies and all, runs. Through the real HTTP client against the fake
//! llama.cpp, which sends the grammar.

mod common;

use common::constrained::run;
use pretty_assertions::assert_eq;

use tagloop::agent::Status;
use tagloop::llm::NoticeKind;

const SENTENCE: &str = "This is a note from the user. ";
const ANSWER: &str = "<thought>Done.</thought>\n<final_answer>done</final_answer>";

/// Six copies, 180 bytes: far under the ordinary guard's 512.
fn call() -> String {
    format!(
        "<thought>I echo it.</thought>\n<action>echo(text=\"{}\")</action>",
        SENTENCE.repeat(6)
    )
}

#[tokio::test]
async fn a_sentence_nobody_gave_said_again_in_a_call_is_cut_and_not_run() {
    let ran = run("Echo a short note.", vec![call(), ANSWER.into()]).await;
    assert_eq!(ran.outcome.status, Status::Ok, "{:?}", ran.outcome.error);
    assert!(ran.outcome.progress.tools_used.is_empty());
    assert!(ran.told(NoticeKind::RepetitionCut), "{:?}", ran.notices);
    let (_, second) = ran.sent(1);
    assert!(second.contains("Your turn was cut off"), "{second}");
    // The history keeps the call up to its first copy.
    assert_eq!(second.matches("from the user").count(), 1, "{second}");
}

#[tokio::test]
async fn a_sentence_the_task_asked_for_again_and_again_runs() {
    let task = "Echo 'This is a note from the user.' six times.";
    let ran = run(task, vec![call(), ANSWER.into()]).await;
    assert_eq!(ran.outcome.status, Status::Ok, "{:?}", ran.outcome.error);
    assert_eq!(ran.outcome.progress.tools_used, ["echo"]);
    assert!(!ran.told(NoticeKind::RepetitionCut), "{:?}", ran.notices);
    let echoed = format!("echo: {}", SENTENCE.repeat(6));
    let (_, all) = ran.sent(1);
    assert!(all.contains(echoed.trim_end()), "every copy was echoed");
}
