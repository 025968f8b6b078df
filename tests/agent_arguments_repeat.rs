//! A constrained call whose argument says one sentence again and again is held to the ordinary
//! degeneration guard, not the strict one of a thought: a call may rightly repeat a sentence (the
//! task asked for it, or it copies a file the run read), so six copies run whole, whether or not
//! the run was ever given the sentence; forty, past the ordinary thresholds (eight copies over
//! 512 bytes), are cut after the first copy and not run. Through the real HTTP client against
//! the fake llama.cpp, which sends the grammar.

mod common;

use common::constrained::run;
use pretty_assertions::assert_eq;

use tagloop::agent::Status;
use tagloop::llm::NoticeKind;

const SENTENCE: &str = "This is a note from the user. ";
const ANSWER: &str = "<thought>Done.</thought>\n<final_answer>done</final_answer>";

/// A call of `echo` with `copies` copies of the sentence.
fn call(copies: usize) -> String {
    format!(
        "<thought>I echo it.</thought>\n<action>echo(text=\"{}\")</action>",
        SENTENCE.repeat(copies)
    )
}

#[tokio::test]
async fn a_sentence_said_again_in_a_call_runs_whether_or_not_the_run_was_given_it() {
    for task in [
        "Echo a short note.",
        "Echo 'This is a note from the user.' six times.",
    ] {
        // Six copies, 180 bytes: past the strict thresholds (three copies over 96 bytes), which
        // end at `<action>`, and far under the ordinary ones.
        let ran = run(task, vec![call(6), ANSWER.into()]).await;
        assert_eq!(ran.outcome.status, Status::Ok, "{:?}", ran.outcome.error);
        assert_eq!(ran.outcome.progress.tools_used, ["echo"], "{task}");
        assert!(!ran.told(NoticeKind::RepetitionCut), "{:?}", ran.notices);
        let echoed = format!("echo: {}", SENTENCE.repeat(6));
        let (_, all) = ran.sent(1);
        assert!(all.contains(echoed.trim_end()), "every copy was echoed");
    }
}

#[tokio::test]
async fn a_sentence_said_past_the_ordinary_thresholds_in_a_call_is_cut_and_not_run() {
    // Forty copies, 1,200 bytes.
    let ran = run("Echo a short note.", vec![call(40), ANSWER.into()]).await;
    assert_eq!(ran.outcome.status, Status::Ok, "{:?}", ran.outcome.error);
    assert!(ran.outcome.progress.tools_used.is_empty());
    assert!(ran.told(NoticeKind::RepetitionCut), "{:?}", ran.notices);
    let (_, second) = ran.sent(1);
    assert!(second.contains("Your turn was cut off"), "{second}");
    // The history keeps the call up to its first copy.
    assert_eq!(second.matches("from the user").count(), 1, "{second}");
}
