//! Issue 25, items 2, 3 and 8, from the outside: every command is quiet and successful when
//! the reader of its output goes away, `replay` writes the run on stdout, `replay` and
//! `continue` take `last` and unique prefixes, Ctrl-C names the command that goes on, and a run
//! that fails before its first turn never leaves a session that looks alive or empty.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

use common::cli::Env;

impl Env {
    fn sessions(&self) -> PathBuf {
        self.path("sessions")
    }

    /// A finished scripted run (list the workspace, then answer); its session id.
    fn finished_run(&self, answer: &str) -> String {
        let turns = [
            "<thought>look</thought><action>list_dir()</action>".to_string(),
            format!("<final_answer>{answer}</final_answer>"),
        ];
        let turns: Vec<&str> = turns.iter().map(String::as_str).collect();
        let m = common::script::file(&self.path(&format!("script-{answer}.txt")), &turns);
        let out = self
            .cmd()
            .args(["run", "--json", "--model", &m, "--workspace"])
            .arg(self.path("ws"))
            .arg("the task")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let o: Value = serde_json::from_slice(&out.stdout).unwrap();
        o["session"].as_str().unwrap().to_string()
    }
}

/// Run `cmd` with its stdout a pipe whose reading end is already closed: the first write to
/// stdout fails with `EPIPE`, whatever the timing.
fn with_closed_stdout(mut cmd: StdCommand) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    cmd.stdout(writer)
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    cmd.output().unwrap()
}

/// Assert that a command whose reader went away ended quietly with `code`.
fn assert_quiet(what: &str, out: &Output, code: i32) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{what}: {err}");
    for bad in ["panicked", "Broken pipe", "error"] {
        assert!(!err.contains(bad), "{what}: stderr says {bad:?}: {err}");
    }
}

#[test]
fn every_command_is_quiet_and_successful_when_its_reader_is_gone() {
    let env = Env::new();
    let id = env.finished_run("done");
    std::fs::write(env.path("turn.txt"), "<action>list_dir()</action>").unwrap();
    let m = common::script::file(&env.path("again.txt"), &["<final_answer>x</final_answer>"]);
    let commands: Vec<(&str, Vec<String>)> = vec![
        ("sessions", vec!["sessions".into()]),
        ("sessions --json", vec!["sessions".into(), "--json".into()]),
        ("replay", vec!["replay".into(), id.clone()]),
        ("parse", vec!["parse".into(), "turn.txt".into()]),
        (
            "parse --json",
            vec!["parse".into(), "--json".into(), "turn.txt".into()],
        ),
        (
            "run --json",
            vec![
                "run".into(),
                "--json".into(),
                "--model".into(),
                m.clone(),
                "t".into(),
            ],
        ),
        (
            "run",
            vec!["run".into(), "--model".into(), m.clone(), "t".into()],
        ),
        ("tools", vec!["tools".into()]),
        ("tools --json", vec!["tools".into(), "--json".into()]),
        ("prompt", vec!["prompt".into(), "a task".into()]),
        ("completions", vec!["completions".into(), "bash".into()]),
    ];
    for (what, args) in commands {
        let mut c = env.std_cmd();
        c.args(&args);
        assert_quiet(what, &with_closed_stdout(c), 0);
    }
}

#[test]
fn sessions_through_head_stops_quietly_when_head_has_read_enough() {
    let env = Env::new();
    // Far more than a pipe holds (64 KiB): `tagloop` is still writing when the reader leaves.
    for i in 0..2000 {
        let id = format!("20260101-{:06}-00001-{i}", i % 1_000_000);
        let task = format!("task number {i} with enough words to make the line long");
        std::fs::write(
            env.sessions().join(format!("{id}.jsonl")),
            format!(
                "{{\"type\":\"run_started\",\"task\":\"{task}\",\"started\":\"2026-01-01T00:00:00Z\"}}\n"
            ),
        )
        .unwrap();
    }
    let mut child = env
        .std_cmd()
        .arg("sessions")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for _ in 0..3 {
        lines.next().unwrap().unwrap();
    }
    drop(lines); // `head -3` exits
    let out = child.wait_with_output().unwrap();
    assert_quiet("sessions | head -3", &out, 0);
}

#[test]
fn replay_writes_the_run_on_stdout_and_notices_on_stderr() {
    let env = Env::new();
    let id = env.finished_run("the answer");
    let out = env.cmd().args(["replay", &id]).output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in ["the task", "look", "list_dir", "the answer"] {
        assert!(stdout.contains(needle), "stdout lacks {needle}: {stdout}");
    }
    assert!(
        !stderr.contains("list_dir"),
        "the replay went to stderr: {stderr}"
    );
    // Not a terminal: no escape sequences, whatever NO_COLOR says.
    let out = env
        .cmd()
        .env_remove("NO_COLOR")
        .args(["replay", &id])
        .output()
        .unwrap();
    assert!(!out.stdout.contains(&0x1b), "styled output to a pipe");
    // --html writes the page, says so on stderr, and leaves stdout empty.
    let out = env
        .cmd()
        .args(["replay", &id, "--html", "page.html"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("page.html"));
    assert!(env.path("page.html").is_file());
}

/// Rewrite the `started` time of a session's first record.
fn set_started(path: &Path, started: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let mut r: Value = serde_json::from_str(line).unwrap();
        if i == 0 {
            r["started"] = started.into();
        }
        out.push_str(&r.to_string());
        out.push('\n');
    }
    std::fs::write(path, out).unwrap();
}

#[test]
fn last_is_the_newest_session_by_its_recorded_time_not_its_file_time() {
    let env = Env::new();
    let first = env.finished_run("first");
    let second = env.finished_run("second");
    // The first session says it started later; its file is also older. `last` reads the record.
    set_started(
        &env.sessions().join(format!("{first}.jsonl")),
        "2099-01-01T00:00:00Z",
    );
    let f = std::fs::File::options()
        .append(true)
        .open(env.sessions().join(format!("{second}.jsonl")))
        .unwrap();
    f.set_modified(std::time::SystemTime::now() + Duration::from_secs(3600))
        .unwrap();
    let out = env.cmd().args(["replay", "last"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("first") && !stdout.contains("second"),
        "{stdout}"
    );
    // `continue last` goes on with that one, in place.
    // A continued script goes on from the turns the session already used (two).
    let m = common::script::file(
        &env.path("more.txt"),
        &["(used)", "(used)", "<final_answer>more</final_answer>"],
    );
    let out = env
        .cmd()
        .args(["continue", "last", "and?", "--json", "--model", &m])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(o["session"], first.as_str());
    assert_eq!(o["final"], "more");
}

#[test]
fn a_unique_prefix_names_a_session_and_an_ambiguous_one_lists_the_candidates() {
    let env = Env::new();
    let a = env.finished_run("alpha");
    let b = env.finished_run("beta");
    // Ids are time-pid-counter: the pid tells two runs apart.
    let prefix = |id: &str| id.rsplit_once('-').unwrap().0.to_string();
    assert_ne!(prefix(&a), prefix(&b));
    for (id, answer) in [(&a, "alpha"), (&b, "beta")] {
        let out = env.cmd().args(["replay", &prefix(id)]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains(answer));
    }
    // A prefix of both: exit 2, both ids named.
    let common_prefix: String = a
        .chars()
        .zip(b.chars())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect();
    let out = env
        .cmd()
        .args(["continue", &common_prefix, "msg"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&a) && err.contains(&b), "{err}");
    let out = env.cmd().args(["replay", &common_prefix]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&a) && err.contains(&b), "{err}");
    // No match: exit 2, saying how to list the sessions.
    let out = env.cmd().args(["replay", "nope"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("tagloop sessions"), "{err}");
    // `last` in an empty folder is the same kind of error.
    let out = env
        .cmd()
        .args(["replay", "last", "--session-dir"])
        .arg(env.path("ws"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // A path still works, from anywhere.
    let moved = env.path("ws/kept.jsonl");
    std::fs::copy(env.sessions().join(format!("{a}.jsonl")), &moved).unwrap();
    let out = env.cmd().arg("replay").arg(&moved).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("alpha"));
}

#[test]
fn ctrl_c_names_the_command_that_continues_the_run() {
    let env = Env::new();
    let turns = [
        "<action>write_file(path=\"a.txt\", content=\"one\")</action>",
        // Slow the first time only: the continued run does this step again.
        "<action>run_command(command=\"test -e mark || (touch mark; sleep 30)\")</action>",
        "<final_answer>finished</final_answer>",
    ];
    let m = common::script::file(&env.path("s.txt"), &turns);
    let child = env
        .std_cmd()
        .args(["run", "--model", &m, "--allow-write", "--allow-shell"])
        .arg("--workspace")
        .arg(env.path("ws"))
        .arg("t")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the slow command runs (its action is on disk before the tool is awaited).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let running = std::fs::read_dir(env.sessions())
            .unwrap()
            .flatten()
            .any(|e| {
                std::fs::read_to_string(e.path())
                    .unwrap_or_default()
                    .contains("sleep 30")
            });
        if running {
            break;
        }
        assert!(Instant::now() < deadline, "the slow step never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix("continue with: "))
        .unwrap_or_else(|| panic!("no `continue with:` line: {err}"));
    // The exact command: the gates and the workspace are restated, nothing else is needed.
    let words: Vec<String> = line
        .split(' ')
        .map(|w| w.trim_matches('\'').to_string())
        .collect();
    assert_eq!(words[..2], ["tagloop", "continue"], "{line}");
    for flag in ["--allow-write", "--allow-shell", "--workspace"] {
        assert!(words.iter().any(|w| w == flag), "{flag} missing: {line}");
    }
    let out = env.cmd().args(&words[1..]).arg("--json").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        !err.contains("does not restore"),
        "something was not restated: {err}"
    );
    let o: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(o["final"], "finished");
    assert_eq!(
        std::fs::read_to_string(env.path("ws/a.txt")).unwrap(),
        "one"
    );
}

#[test]
fn a_run_that_fails_before_its_first_turn_is_never_listed_as_running_or_empty() {
    let env = Env::new();
    // No server on the port: the run starts, fails at its first request, and says so.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    env.cmd()
        .args(["run", "--base-url", &url, "--model", "m", "--json", "t"])
        .assert()
        .code(1);
    let list = |env: &Env| -> Vec<Value> {
        let out = env.cmd().args(["sessions", "--json"]).output().unwrap();
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    };
    let l = list(&env);
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(
        (l[0]["status"].as_str(), l[0]["task"].as_str()),
        (Some("error"), Some("t"))
    );
    // A template that fails to render: a usage error before the run exists, no session left.
    std::fs::write(env.path("bad.j2"), "{{ no_such_function() }}").unwrap();
    env.cmd()
        .args([
            "run",
            "--base-url",
            &url,
            "--model",
            "m",
            "--prompt-template",
            "bad.j2",
            "t",
        ])
        .assert()
        .code(2);
    assert_eq!(list(&env).len(), 1, "{:?}", list(&env));
    // A transcript with no record (left by a crash, or by an older tagloop) is an error, not
    // a run in progress.
    std::fs::write(env.sessions().join("20200101-000000-00001-0.jsonl"), "").unwrap();
    let l = list(&env);
    assert_eq!(l.len(), 2);
    assert_eq!(l[1]["status"], "error", "{l:?}");
    assert_eq!(l[1]["started"], "2020-01-01T00:00:00Z", "{l:?}");
}

/// A listing keeps the first 1,000 characters of each task, not the whole task: a session
/// directory full of runs with huge tasks cannot make `sessions` hold them all.
#[test]
fn a_listed_task_is_its_first_thousand_characters() {
    let dir = tempfile::tempdir().unwrap();
    let task = "x".repeat(5_000);
    let line =
        serde_json::json!({"type": "run_started", "task": task, "started": "2026-01-01T00:00:00Z"});
    std::fs::write(
        dir.path().join("20260101-000000-1-0.jsonl"),
        format!("{line}\n"),
    )
    .unwrap();
    let out = assert_cmd::Command::cargo_bin("tagloop")
        .unwrap()
        .args(["sessions", "--json", "--session-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let shown = listed[0]["task"].as_str().unwrap();
    assert_eq!(shown.chars().count(), 1001, "{shown:.40}");
    assert!(shown.ends_with('…'));
}
