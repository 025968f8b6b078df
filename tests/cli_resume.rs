//! Runs and batches that go on (the `tagloop` binary from the outside): a run killed with SIGKILL
//! continues to its end, a finished session takes a follow-up question, batches resume with one
//! line a task, replay shows every step, and the session folder can come from `.env`.

mod common;

use std::path::Path;
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::cli::{Env, outcome};

fn session_ids(env: &Env) -> Vec<Value> {
    let out = env
        .cmd()
        .args(["sessions", "--json"])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice::<Value>(&out)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn a_run_killed_with_sigkill_continues_to_the_end() {
    let env = Env::new();
    let turns = [
        "<action>write_file(path=\"a.txt\", content=\"one\")</action>",
        "<action>run_command(command=\"sleep 3; echo slept >> b.txt\")</action>",
        "<action>append_file(path=\"a.txt\", content=\" two\")</action>",
        "<final_answer>finished</final_answer>",
    ];
    let m = env.turns_file("s", &turns);
    let bin = assert_cmd::cargo::cargo_bin("tagloop");
    let mut child = StdCommand::new(&bin)
        .current_dir(env.dir.path())
        .env("TAGLOOP_SESSION_DIR", env.path("sessions"))
        .args([
            "run",
            "--model",
            &m,
            "--allow-write",
            "--allow-shell",
            "--workspace",
        ])
        .arg(env.path("ws"))
        .args(["--json", "t"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the first step is on disk, then kill during the slow second step.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let done = std::fs::read_dir(env.path("sessions"))
            .unwrap()
            .flatten()
            .any(|e| {
                std::fs::read_to_string(e.path())
                    .unwrap_or_default()
                    .contains("\"step_completed\"")
            });
        if done {
            break;
        }
        assert!(Instant::now() < deadline, "the first step never completed");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let list = session_ids(&env);
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["status"], "incomplete");
    assert_eq!(list[0]["steps"], 1);
    let id = list[0]["id"].as_str().unwrap().to_string();

    // Gates and the workspace are never restored from a session: the user restates them.
    let o = env.continue_ok(&[&id, "--allow-write", "--allow-shell"]);
    assert_eq!(o["status"], "ok");
    assert_eq!(o["final"], "finished");
    assert_eq!(o["steps"], 3, "no step lost or repeated");
    assert_eq!(o["llm_calls"], 4);
    assert_eq!(
        std::fs::read_to_string(env.path("ws/a.txt")).unwrap(),
        "one two"
    );
    assert_eq!(session_ids(&env)[0]["status"], "ok");
    // A finished session needs a message to go on.
    env.cmd().args(["continue", &id]).assert().code(2);
}

#[test]
fn replay_and_html_show_every_step() {
    let env = Env::new();
    let m = env.turns_file(
        "s",
        &[
            "<thought>first look</thought><action>list_dir()</action>",
            "<thought>then <b>answer</b></thought><final_answer>A & B</final_answer>",
        ],
    );
    let o = outcome(
        &env.run_model(&m, &["--json", "t"])
            .assert()
            .code(0)
            .get_output()
            .stdout,
    );
    let id = o["session"].as_str().unwrap();
    let out = env
        .cmd()
        .args(["replay", id])
        .assert()
        .code(0)
        .get_output()
        .clone();
    // The replay is the command's output: on stdout.
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("list_dir") && shown.contains("A & B"),
        "{shown}"
    );
    env.cmd()
        .args(["replay", id, "--html", "page.html"])
        .assert()
        .code(0);
    let html = std::fs::read_to_string(env.path("page.html")).unwrap();
    for needle in [
        "first look",
        "list_dir",
        "observation",
        // minijinja's HTML escaping writes `/` as `&#x2f;` too.
        "then &lt;b&gt;answer&lt;&#x2f;b&gt;",
        "A &amp; B",
        "step 1",
        "step 2",
    ] {
        assert!(html.contains(needle), "{needle} missing from the page");
    }
    assert!(!html.contains("<script") && html.starts_with("<!doctype html>"));
    env.cmd()
        .args(["replay", "no-such-session"])
        .assert()
        .code(2);
}

#[test]
fn a_finished_session_continues_with_a_follow_up_question() {
    let env = Env::new();
    let m = env.turns_file(
        "s",
        &[
            "<action>list_dir()</action>",
            "<final_answer>first answer</final_answer>",
            "<thought>The follow-up.</thought><final_answer>second answer</final_answer>",
        ],
    );
    let o = outcome(
        &env.run_model(&m, &["--json", "first question"])
            .assert()
            .code(0)
            .get_output()
            .stdout,
    );
    let id = o["session"].as_str().unwrap().to_string();
    let o2 = outcome(
        &env.cmd()
            .args([
                "continue",
                &id,
                "and a follow-up?",
                "--json",
                "--events",
                "ev.jsonl",
            ])
            .assert()
            .code(0)
            .get_output()
            .stdout,
    );
    assert_eq!(o2["final"], "second answer");
    assert_eq!(
        o2["session"], o["session"],
        "one session holds the whole conversation"
    );
    assert_eq!(o2["steps"], 1);
    assert_eq!(o2["llm_calls"], 3);
    // The model saw the whole history and then the new question.
    let events = std::fs::read_to_string(env.path("ev.jsonl")).unwrap();
    let messages: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "message")
        .map(|e| e["message"].clone())
        .collect();
    let contents: Vec<&str> = messages
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(contents.iter().any(|c| c.contains("first question")));
    assert!(contents.iter().any(|c| c.contains("first answer")));
    assert!(
        contents
            .iter()
            .any(|c| c.contains("<question>\nand a follow-up?\n</question>"))
    );
    let list = session_ids(&env);
    assert_eq!((list.len(), list[0]["status"].as_str()), (1, Some("ok")));
}

fn message_events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "message")
        .map(|e| e["message"].clone())
        .collect()
}

#[test]
fn a_session_continued_twice_keeps_one_clean_history() {
    let env = Env::new();
    let m = env.turns_file(
        "s",
        &[
            "<action>list_dir()</action>",
            "<final_answer>a1</final_answer>",
            "<final_answer>a2</final_answer>",
            "<final_answer>a3</final_answer>",
        ],
    );
    let o = outcome(
        &env.run_model(&m, &["--json", "q1"])
            .assert()
            .code(0)
            .get_output()
            .stdout,
    );
    let id = o["session"].as_str().unwrap().to_string();
    env.cmd()
        .args(["continue", &id, "q2", "--json"])
        .assert()
        .code(0);
    let out = env
        .cmd()
        .args(["continue", &id, "q3", "--json", "--events", "ev.jsonl"])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    assert_eq!(outcome(&out)["final"], "a3");
    let msgs = message_events(&env.path("ev.jsonl"));
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant"
        ],
        "system, q1, action, observation, a1, q2, a2, q3, a3"
    );
    assert_eq!(roles.iter().filter(|r| **r == "system").count(), 1);
}

#[test]
fn a_run_that_ended_in_an_error_continues_without_a_message() {
    let env = Env::new();
    // The script runs out after the first step: the run ends with status error (exit 1).
    let m = env.turns_file("s", &["<action>list_dir()</action>"]);
    let o = outcome(
        &env.run_model(&m, &["--json", "t"])
            .assert()
            .code(1)
            .get_output()
            .stdout,
    );
    let id = o["session"].as_str().unwrap().to_string();
    // The "server" comes back with more turns.
    env.turns_file(
        "s",
        &[
            "<action>list_dir()</action>",
            "<final_answer>recovered</final_answer>",
        ],
    );
    let o = outcome(
        &env.cmd()
            .args(["continue", &id, "--json"])
            .assert()
            .code(0)
            .get_output()
            .stdout,
    );
    assert_eq!(
        (o["final"].as_str(), o["steps"].as_u64()),
        (Some("recovered"), Some(1))
    );
}

#[test]
fn a_killed_batch_resumes_with_exactly_one_line_per_task() {
    let env = Env::new();
    let m = env.turns_file(
        "s",
        &[
            "<action>run_command(command=\"sleep 0.2\")</action>",
            "<final_answer>ok</final_answer>",
        ],
    );
    let input: String = (0..200)
        .map(|i| format!("{{\"id\": \"t{i}\", \"task\": \"task {i}\"}}\n"))
        .collect();
    std::fs::write(env.path("in.jsonl"), input).unwrap();
    let bin = assert_cmd::cargo::cargo_bin("tagloop");
    let args = |c: &mut StdCommand| {
        c.current_dir(env.dir.path())
            .env("TAGLOOP_SESSION_DIR", env.path("sessions"))
            .args([
                "batch",
                "in.jsonl",
                "--out",
                "out.jsonl",
                "--concurrency",
                "20",
                "--no-sessions",
                "--allow-shell",
                "--model",
                &m,
                "--workspace",
            ])
            .arg(env.path("ws"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
    };
    let mut c = StdCommand::new(&bin);
    args(&mut c);
    let mut child = c.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = std::fs::read_to_string(env.path("out.jsonl"))
            .unwrap_or_default()
            .lines()
            .count();
        if n >= 40 {
            break;
        }
        assert!(Instant::now() < deadline, "the batch made no progress");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let partial = std::fs::read_to_string(env.path("out.jsonl"))
        .unwrap()
        .lines()
        .count();
    assert!(
        partial < 200,
        "killed too late to test resuming ({partial} lines)"
    );

    let mut c = StdCommand::new(&bin);
    args(&mut c);
    assert!(c.status().unwrap().success());
    let text = std::fs::read_to_string(env.path("out.jsonl")).unwrap();
    let mut ids: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| {
            assert_eq!(v["status"], "ok");
            v["id"].as_str().unwrap().to_string()
        })
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 200, "every task exactly once");
    assert!(
        text.lines()
            .filter(|l| serde_json::from_str::<Value>(l).is_ok())
            .count()
            >= 200
    );
}

#[test]
fn a_batch_resumes_over_a_line_cut_inside_a_character() {
    let env = Env::new();
    let m = env.turns_file("s", &["<final_answer>é</final_answer>"]);
    let input: String = (0..5)
        .map(|i| format!("{{\"id\": {i}, \"task\": \"t{i}\"}}\n"))
        .collect();
    std::fs::write(env.path("in.jsonl"), input).unwrap();
    // One finished line, then half of a line cut in the middle of "é" (0xC3 0xA9).
    let mut out =
        b"{\"id\": 0, \"status\": \"ok\", \"final\": \"done\"}\n{\"id\": 1, \"final\": \"\xC3"
            .to_vec();
    out.truncate(out.len());
    std::fs::write(env.path("out.jsonl"), &out).unwrap();
    env.cmd()
        .args([
            "batch",
            "in.jsonl",
            "--out",
            "out.jsonl",
            "--no-sessions",
            "--model",
            &m,
            "--workspace",
        ])
        .arg(env.path("ws"))
        .assert()
        .code(0);
    let bytes = std::fs::read(env.path("out.jsonl")).unwrap();
    let ids: Vec<i64> = bytes
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .map(|v| v["id"].as_i64().unwrap())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [0, 1, 2, 3, 4],
        "task 1 was run again, task 0 was not"
    );
}

#[test]
fn the_session_folder_can_come_from_dot_env_for_run_and_sessions() {
    let env = Env::new();
    let model = env.turns_file("s", &["<final_answer>done</final_answer>"]);
    std::fs::write(env.path(".env"), "TAGLOOP_SESSION_DIR=from-dotenv\n").unwrap();
    let out = env
        .run_model(&model, &["--json", "--quiet", "hi"])
        .env_remove("TAGLOOP_SESSION_DIR")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = outcome(&out.stdout)["session"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        env.path("from-dotenv")
            .join(format!("{id}.jsonl"))
            .is_file()
    );
    // `sessions` looks in the same place.
    let list = env
        .cmd()
        .env_remove("TAGLOOP_SESSION_DIR")
        .args(["sessions", "--json"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&list.stdout).contains(&id));
    // The environment wins over .env, as for every other variable.
    let out = env
        .run_model(&model, &["--json", "--quiet", "hi"])
        .output()
        .unwrap();
    let id = outcome(&out.stdout)["session"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(env.path("sessions").join(format!("{id}.jsonl")).is_file());
}
