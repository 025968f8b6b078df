//! `tagloop wrap`: an external program as a role, from the outside (assert_cmd).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;

mod common;

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sessions")).unwrap();
        Env { dir }
    }
    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }
    fn wrap(&self, extra: &[&str], command: &[&str]) -> Command {
        let mut c = Command::cargo_bin("tagloop").unwrap();
        c.current_dir(self.dir.path())
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("TAGLOOP_MODEL")
            .env("TAGLOOP_SESSION_DIR", self.path("sessions"))
            .env("NO_COLOR", "1")
            .args(["wrap", "--json", "--quiet"])
            .args(extra)
            .arg("--")
            .args(command);
        c
    }
    /// The records of the one session written.
    fn transcript(&self, outcome: &Value) -> Vec<Value> {
        let id = outcome["session"].as_str().expect("a session");
        std::fs::read_to_string(self.path("sessions").join(format!("{id}.jsonl")))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn outcome(out: &[u8]) -> Value {
    serde_json::from_slice(out).unwrap_or_else(|e| {
        panic!(
            "not one JSON object ({e}): {}",
            String::from_utf8_lossy(out)
        )
    })
}

#[test]
fn without_a_schema_the_output_is_the_answer_and_no_model_is_called() {
    let env = Env::new();
    std::fs::write(env.path("ctx.txt"), "the context").unwrap();
    let out = env
        .wrap(
            &["--task", "count the apples", "--context", "ctx.txt"],
            &["sh", "-c", "echo \"stdin: $(cat | tr '\\n' ' ')\"; echo \"var: $TAGLOOP_TASK\"; echo \"key: ${OPENAI_API_KEY:-none}\""],
        )
        .env("OPENAI_API_KEY", "sk-wrap-secret-1234567890")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o = outcome(&out.stdout);
    let final_text = o["final"].as_str().unwrap();
    assert!(
        final_text.contains("stdin: count the apples"),
        "{final_text}"
    );
    assert!(final_text.contains("the context"), "{final_text}");
    assert!(final_text.contains("var: count the apples"), "{final_text}");
    assert!(
        final_text.contains("key: none"),
        "the wrapped program never sees the key: {final_text}"
    );
    assert_eq!(o["status"], "ok");
    assert_eq!(o["steps"], 0);
    assert_eq!(o["llm_calls"], 0);
    assert_eq!(o["exit_code"], 0);
    assert!(o["seconds"].as_f64().unwrap() >= 0.0);
    // The transcript records the command, its output and the outcome.
    let records = env.transcript(&o);
    assert_eq!(records[0]["type"], "run_started");
    assert_eq!(records[0]["meta"]["wrap"]["program"], "sh");
    assert_eq!(records[0]["meta"]["wrap"]["arguments"], 2);
    assert!(records.iter().any(|r| r["type"] == "final"));
    assert_eq!(records.last().unwrap()["type"], "finished");
}

#[test]
fn with_a_schema_the_model_extracts_the_result_with_corrections() {
    let env = Env::new();
    std::fs::write(
        env.path("schema.json"),
        r#"{"type": "object", "properties": {"apples": {"type": "integer"}}, "required": ["apples"]}"#,
    )
    .unwrap();
    let script = common::script::file(
        &env.path("extract.script"),
        &[
            "<thought>It says twelve.</thought><final_answer>twelve</final_answer>",
            "<thought>As JSON.</thought><final_answer>{\"apples\": 12}</final_answer>",
        ],
    );
    let out = env
        .wrap(
            &[
                "--task",
                "count the apples",
                "--output-schema",
                "schema.json",
                "--model",
                &script,
            ],
            &["sh", "-c", "echo 'I counted 12 apples in the basket.'"],
        )
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o = outcome(&out.stdout);
    assert_eq!(o["final"], serde_json::json!({"apples": 12}));
    assert_eq!(o["llm_calls"], 2, "one extraction, one correction");
    assert_eq!(o["steps"], 0);
    assert_eq!(o["exit_code"], 0);
    let records = env.transcript(&o);
    assert_eq!(records[0]["meta"]["wrap"]["exit_code"], 0);
    let question = records
        .iter()
        .find(|r| r["type"] == "message" && r["message"]["role"] == "user")
        .expect("the extraction's question");
    assert!(
        question["message"]["content"]
            .as_str()
            .unwrap()
            .contains("I counted 12 apples")
    );
    assert!(
        records
            .iter()
            .any(|r| r["type"] == "correction" && r["kind"] == "invalid_final")
    );
}

/// The extraction has no tools: a report that names files (a wrapped coding agent's, say) is
/// never refused for files no call of it could use (issue 43).
#[test]
fn a_report_that_names_files_is_extracted_without_a_refusal() {
    let env = Env::new();
    std::fs::write(
        env.path("schema.json"),
        r#"{"type": "object", "properties": {"issues": {"type": "integer"}}, "required": ["issues"]}"#,
    )
    .unwrap();
    let script = common::script::file(
        &env.path("extract.script"),
        &["<thought>Three.</thought><final_answer>{\"issues\": 3}</final_answer>"],
    );
    let out = env
        .wrap(
            &[
                "--task",
                "review the code",
                "--output-schema",
                "schema.json",
                "--model",
                &script,
            ],
            &[
                "sh",
                "-c",
                "echo 'Found 3 issues: two in src/main.rs, one in lib/util.py (see notes.txt).'",
            ],
        )
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o = outcome(&out.stdout);
    assert_eq!(o["final"], serde_json::json!({"issues": 3}));
    assert_eq!(o["llm_calls"], 1, "accepted at once");
    assert!(
        !env.transcript(&o).iter().any(|r| r["type"] == "correction"),
        "no correction"
    );
}

#[test]
fn a_failing_command_is_an_error_with_the_end_of_its_stderr() {
    let env = Env::new();
    let out = env
        .wrap(
            &["--task", "t"],
            &[
                "sh",
                "-c",
                "echo partial; echo 'it broke: disk full' >&2; exit 4",
            ],
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let o = outcome(&out.stdout);
    assert_eq!(o["status"], "error");
    assert_eq!(o["exit_code"], 4);
    assert_eq!(o["final"], Value::Null);
    let err = o["error"].as_str().unwrap();
    assert!(
        err.contains("exited with 4") && err.contains("it broke: disk full"),
        "{err}"
    );
    // A program that cannot start is an error too.
    let out = env
        .wrap(&["--task", "t"], &["no-such-program-tagloop"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        outcome(&out.stdout)["error"]
            .as_str()
            .unwrap()
            .contains("cannot run")
    );
}

#[test]
fn a_timeout_kills_the_whole_process_tree() {
    let env = Env::new();
    let pidfile = env.path("child.pid");
    let started = Instant::now();
    let out = env
        .wrap(
            &["--task", "t", "--timeout", "1"],
            &[
                "sh",
                "-c",
                &format!(
                    "sleep 60 & echo $! > {}; echo waiting >&2; wait",
                    pidfile.display()
                ),
            ],
        )
        .output()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(1));
    let o = outcome(&out.stdout);
    assert_eq!(o["status"], "error");
    assert!(
        o["error"]
            .as_str()
            .unwrap()
            .contains("did not finish within 1 s"),
        "{o}"
    );
    assert!(o["error"].as_str().unwrap().contains("waiting"), "{o}");
    let pid = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .to_string();
    // The background child is gone (or a zombie already reaped): no live process with its pid.
    let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false);
    assert!(!alive, "the background sleep {pid} survived the timeout");
}

#[test]
fn wrap_needs_a_command_and_a_task() {
    let env = Env::new();
    let mut c = Command::cargo_bin("tagloop").unwrap();
    let out = c
        .current_dir(env.dir.path())
        .args(["wrap", "--task", "t"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = env.wrap(&["--task", " "], &["true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Issue 21 item 8: the wrapped command line can hold secrets (`--api-key=…`, a token after a
/// flag). Neither the transcript, nor the outcome, nor what the model reads may hold them: only
/// the program's name and how many arguments it had are kept.
#[test]
fn the_wrapped_command_line_is_stored_as_its_program_and_argument_count() {
    const KEY: &str = "sk-wrap-argv-secret-4242";
    const TOKEN: &str = "tok-wrap-argv-secret-4343";
    let env = Env::new();
    std::fs::write(
        env.path("schema.json"),
        r#"{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}"#,
    )
    .unwrap();
    let script = common::script::file(
        &env.path("extract.script"),
        &["<thought>One.</thought><final_answer>{\"n\": 1}</final_answer>"],
    );
    let key_flag = format!("--api-key={KEY}");
    for (extra, body, code) in [
        // No model: the output is the answer.
        (vec![], "echo one", 0),
        // The model extracts the result from a question that names the program.
        (
            vec!["--output-schema", "schema.json", "--model", script.as_str()],
            "echo one",
            0,
        ),
        // A failure: the error names the program.
        (vec![], "echo broke >&2; exit 3", 1),
    ] {
        let mut args = vec!["--task", "t"];
        args.extend(extra.iter().copied());
        let out = env
            .wrap(&args, &["sh", "-c", body, &key_flag, "--token", TOKEN])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(code),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let o = outcome(&out.stdout);
        let records = env.transcript(&o);
        let file = std::fs::read_to_string(
            env.path("sessions")
                .join(format!("{}.jsonl", o["session"].as_str().unwrap())),
        )
        .unwrap();
        for (what, text) in [
            ("stdout", String::from_utf8_lossy(&out.stdout).into_owned()),
            ("stderr", String::from_utf8_lossy(&out.stderr).into_owned()),
            ("the transcript", file),
        ] {
            assert!(
                !text.contains(KEY) && !text.contains(TOKEN),
                "{body}: {what} holds an argument:\n{text}"
            );
        }
        let wrap = &records[0]["meta"]["wrap"];
        if code == 0 {
            assert_eq!(wrap["program"], "sh", "{wrap}");
            assert_eq!(wrap["arguments"], 5, "{wrap}");
        } else {
            let err = o["error"].as_str().unwrap();
            assert!(err.contains("`sh` (5 arguments) exited with 3"), "{err}");
        }
    }
}
