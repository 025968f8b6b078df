//! `tagloop continue` after a kill at any point ends as the uninterrupted run does (issue 43,
//! item 1): what the loop remembers (the files the question names and which calls used them,
//! refusals, the loop guard's calls, what the next turn may do) is rebuilt from the transcript.
//!
//! A transcript is appended to, record by record, and written before every wait: a run killed
//! at any moment leaves a prefix of the uninterrupted run's records. So every prefix, cut at each
//! record, is continued here, and each must end with the same status, answer, steps and model
//! requests, and send the model the very same messages.

mod common;

use serde_json::Value;

use common::cli::{Env, outcome};

const QUESTION: &str = "Compare a.txt and b.txt: which holds the larger number?";

/// An episode that needs the run's memory: the names used (an answer before `b.txt` was read is
/// refused, and a later answer is not) and the loop guard's calls (an A/B/A/B cycle is
/// refused). (What the turn after the refused call may do is remembered too, but the scripted
/// model ignores the grammar that says it, and `b.txt` has been read by then: this episode
/// cannot show it.)
const TURNS: [&str; 7] = [
    "<thought>First a.txt.</thought>\n<action>read_file(path=\"a.txt\")</action>",
    "<thought>It is 7.</thought>\n<final_answer>a.txt</final_answer>",
    "<thought>Then b.txt.</thought>\n<action>read_file(path=\"b.txt\")</action>",
    "<thought>Again a.txt.</thought>\n<action>read_file(path=\"a.txt\")</action>",
    "<thought>Again b.txt.</thought>\n<action>read_file(path=\"b.txt\")</action>",
    "<thought>Once more.</thought>\n<action>read_file(path=\"a.txt\")</action>",
    "<thought>9 is larger.</thought>\n<final_answer>b.txt holds the larger number, 9.</final_answer>",
];

/// A folder with the workspace and the script: the script's path.
fn setup(env: &Env) -> String {
    std::fs::write(env.path("ws/a.txt"), "7\n").unwrap();
    std::fs::write(env.path("ws/b.txt"), "9\n").unwrap();
    env.turns_file("episode", &TURNS)
}

fn records(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn session_file(env: &Env) -> std::path::PathBuf {
    let entry = std::fs::read_dir(env.path("sessions"))
        .unwrap()
        .flatten()
        .find(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .expect("a session file");
    entry.path()
}

/// The messages the model was sent, in order: those committed before the continued run's
/// start (up to the last `step_completed`), then those it added; for an uninterrupted run, all.
fn history(records: &[Value]) -> Vec<(String, String)> {
    let message = |r: &Value| {
        (r["type"] == "message").then(|| {
            let m = &r["message"];
            (
                m["role"].as_str().unwrap_or_default().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
    };
    let starts: Vec<usize> = (0..records.len())
        .filter(|&i| records[i]["type"] == "run_started")
        .collect();
    let Some(&second) = starts.get(1) else {
        return records.iter().filter_map(message).collect();
    };
    let before = &records[..second];
    let committed = before
        .iter()
        .rposition(|r| r["type"] == "step_completed")
        .map_or(0, |i| i + 1);
    let mut kept: Vec<(String, String)> = before[..committed].iter().filter_map(message).collect();
    if kept.len() < 2 {
        kept = before.iter().filter_map(message).take(2).collect();
    }
    kept.extend(records[second..].iter().filter_map(message));
    kept
}

#[test]
fn a_run_killed_at_any_record_continues_as_if_it_never_was() {
    let whole = Env::new();
    let model = setup(&whole);
    let done = outcome(
        &whole
            .run_model(&model, &["--json", QUESTION])
            .assert()
            .code(0)
            .get_output()
            .stdout,
    );
    assert_eq!(done["status"], "ok");
    assert_eq!(done["final"], "b.txt holds the larger number, 9.");
    let path = session_file(&whole);
    let text = std::fs::read_to_string(&path).unwrap();
    let all = records(&text);
    let expected = history(&all);
    // The episode does what it is meant to test.
    let said = |needle: &str| expected.iter().any(|(_, c)| c.contains(needle));
    assert!(
        said("Your answer was not accepted yet: it came before any call used all the files"),
        "the named-files refusal"
    );
    assert!(said("alternating between the same two calls"));

    let name = path.file_name().unwrap().to_owned();
    let id = path.file_stem().unwrap().to_str().unwrap().to_string();
    let lines: Vec<&str> = text.lines().collect();
    // The first two records (the start, the system prompt) are what any continued run needs;
    // they are written one after the other with no wait between (the server was asked its window
    // before), so a run killed before the task was recorded says so and changes nothing.
    for cut in 1..3 {
        let env = Env::new();
        let model = setup(&env);
        let prefix = format!("{}\n", lines[..cut].join("\n"));
        std::fs::write(env.path("sessions").join(&name), &prefix).unwrap();
        let out = env
            .cmd()
            .args(["continue", &id, "--json", "--model", &model, "--workspace"])
            .arg(env.path("ws"))
            .assert()
            .code(2);
        let said = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(said.contains("ends before the task was recorded"), "{said}");
        let left = std::fs::read_to_string(env.path("sessions").join(&name)).unwrap();
        assert_eq!(left, prefix, "the transcript is left as it was");
    }
    for cut in 3..lines.len() {
        let env = Env::new();
        let model = setup(&env);
        let mut prefix = lines[..cut].join("\n");
        prefix.push('\n');
        std::fs::write(env.path("sessions").join(&name), prefix).unwrap();
        let o = outcome(
            &env.cmd()
                .args(["continue", &id, "--json", "--model", &model, "--workspace"])
                .arg(env.path("ws"))
                .assert()
                .get_output()
                .stdout,
        );
        let last = &lines[cut - 1];
        for field in ["status", "final", "steps", "llm_calls"] {
            assert_eq!(o[field], done[field], "{field}, killed after: {last}");
        }
        let after = records(&std::fs::read_to_string(env.path("sessions").join(&name)).unwrap());
        let got = history(&after);
        let first_difference = (0..got.len().max(expected.len()))
            .find(|&i| got.get(i) != expected.get(i))
            .map(|i| (i, got.get(i), expected.get(i)));
        assert_eq!(first_difference, None, "killed after: {last}");
    }
}
