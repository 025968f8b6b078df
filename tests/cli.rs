//! The `tagloop` binary from the outside (assert_cmd): exit codes, `--json` and `--events`,
//! sessions that survive SIGKILL, batches that resume, replay, and secrets that never leak.

use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;

mod common;

use common::cli::Env;
use common::fake_server::{FakeConfig, FakeServer};

impl Env {
    fn script(&self, name: &str, turns: &[&str]) -> String {
        common::script::file(&self.path(name), turns)
    }
    fn run(&self, model: &str, extra: &[&str]) -> Command {
        let mut c = self.cmd();
        c.args(["run", "--model", model, "--workspace"])
            .arg(self.path("ws"))
            .args(extra);
        c
    }
}

fn outcome(out: &[u8]) -> Value {
    serde_json::from_slice(out).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {}",
            String::from_utf8_lossy(out)
        )
    })
}

#[test]
fn run_json_prints_exactly_the_outcome_and_exits_0() {
    let env = Env::new();
    let m = env.script(
        "s",
        &[
            "<thought>t</thought><action>list_dir()</action>",
            "<final_answer>done</final_answer>",
        ],
    );
    let out = env
        .run(&m, &["--json", "the task"])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let o = outcome(&out);
    let keys: Vec<&str> = o.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "status",
            "final",
            "steps",
            "llm_calls",
            "tools_used",
            "usage",
            "session",
            "error"
        ]
    );
    assert_eq!(o["status"], "ok");
    assert_eq!(o["final"], "done");
    assert_eq!(o["tools_used"], serde_json::json!(["list_dir"]));
    assert!(
        env.path("sessions")
            .join(format!("{}.jsonl", o["session"].as_str().unwrap()))
            .is_file()
    );
}

#[test]
fn exit_codes_follow_the_spec() {
    let env = Env::new();
    // max_steps → 3
    let m = env.script(
        "a",
        &[
            "<action>list_dir()</action>",
            "<action>list_dir(path=\"x\")</action>",
        ],
    );
    let o = outcome(
        &env.run(&m, &["--json", "--max-steps", "1", "t"])
            .assert()
            .code(3)
            .get_output()
            .stdout,
    );
    assert_eq!(o["status"], "max_steps");
    // loop_detected → 3
    let call = "<action>list_dir()</action>";
    let m = env.script("b", &[call, call, call, call]);
    let o = outcome(
        &env.run(&m, &["--json", "t"])
            .assert()
            .code(3)
            .get_output()
            .stdout,
    );
    assert_eq!(o["status"], "loop_detected");
    // invalid_final → 3
    std::fs::write(
        env.path("schema.json"),
        r#"{"type": "object", "required": ["n"]}"#,
    )
    .unwrap();
    let m = env.script(
        "c",
        &[
            "<final_answer>1</final_answer>",
            "<final_answer>2</final_answer>",
            "<final_answer>3</final_answer>",
        ],
    );
    let o = outcome(
        &env.run(&m, &["--json", "--output-schema", "schema.json", "t"])
            .assert()
            .code(3)
            .get_output()
            .stdout,
    );
    assert_eq!(o["status"], "invalid_final");
    // a runtime error (the script runs out) → 1
    let m = env.script("d", &["<action>list_dir()</action>"]);
    let o = outcome(
        &env.run(&m, &["--json", "t"])
            .assert()
            .code(1)
            .get_output()
            .stdout,
    );
    assert_eq!(o["status"], "error");
    assert!(o["error"].as_str().unwrap().len() > 5);
    // usage and config errors → 2
    env.cmd()
        .args(["run", "--model", "scripted:/nonexistent/file", "t"])
        .assert()
        .code(2);
    env.run(&m, &[]).assert().code(2); // no task
    env.cmd().args(["run", "--bogus-flag"]).assert().code(2);
    env.cmd().args(["run", "t"]).assert().code(2); // no model at all
    env.cmd()
        .args(["run", "--model", "llama3", "t"])
        .assert()
        .code(2); // a real model needs a server
    env.run(&m, &["--role", "missing.toml", "t"])
        .assert()
        .code(2);
}

#[test]
fn the_task_can_come_from_stdin_and_the_answer_goes_to_stdout() {
    let env = Env::new();
    let m = env.script("s", &["<final_answer>from stdin</final_answer>"]);
    let out = env
        .run(&m, &["-"])
        .write_stdin("what?")
        .assert()
        .code(0)
        .get_output()
        .clone();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from stdin\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("final answer") && err.contains("ok · 0 steps"),
        "{err}"
    );
}

#[test]
fn events_are_json_lines() {
    let env = Env::new();
    let m = env.script(
        "s",
        &[
            "<thought>look</thought><action>list_dir()</action>",
            "<final_answer>x</final_answer>",
        ],
    );
    env.run(&m, &["--events", "ev.jsonl", "t"]).assert().code(0);
    let text = std::fs::read_to_string(env.path("ev.jsonl")).unwrap();
    let types: Vec<String> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(types.first().map(String::as_str), Some("run_started"));
    assert_eq!(types.last().map(String::as_str), Some("finished"));
    for t in [
        "text_delta",
        "thought",
        "action",
        "tool_started",
        "tool_finished",
        "observation",
        "final",
    ] {
        assert!(types.iter().any(|x| x == t), "no {t} event in {types:?}");
    }
    // `--events -` shares stdout with nothing else unless --json is asked for too.
    let out = env
        .run(&m, &["--events", "-", "t"])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let lines: Vec<&str> = std::str::from_utf8(&out).unwrap().lines().collect();
    assert!(
        lines
            .iter()
            .filter(|l| l.starts_with('{'))
            .all(|l| serde_json::from_str::<Value>(l).is_ok())
    );
}

/// Every file below `dir`, read as bytes.
fn all_files(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            all_files(&p, out);
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
}

#[test]
fn the_api_key_is_never_written_anywhere() {
    let env = Env::new();
    let secret = "sk-test-SECRET-5e1f0c";
    let m = env.script(
        "s",
        &[
            "<action>list_dir()</action>",
            "<final_answer>x</final_answer>",
        ],
    );
    let out = env
        .run(
            &m,
            &["--api-key", secret, "--json", "--events", "ev.jsonl", "t"],
        )
        .env("RUST_LOG", "trace")
        .assert()
        .code(0)
        .get_output()
        .clone();
    assert!(!String::from_utf8_lossy(&out.stdout).contains(secret));
    assert!(!String::from_utf8_lossy(&out.stderr).contains(secret));
    let mut files = Vec::new();
    all_files(env.dir.path(), &mut files);
    assert!(files.len() >= 3);
    for (p, bytes) in files {
        if p.file_name().is_some_and(|n| n == "s") {
            continue; // the script itself
        }
        assert!(
            !String::from_utf8_lossy(&bytes).contains(secret),
            "the key leaked into {}",
            p.display()
        );
    }
}

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
    let m = env.script("s", &turns);
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

    let o = outcome(
        &env.cmd()
            // Gates and the workspace are never restored from a session: the user restates them.
            .args(["continue", &id, "--json", "--allow-write", "--allow-shell"])
            .arg("--workspace")
            .arg(env.path("ws"))
            .assert()
            .code(0)
            .get_output()
            .stdout,
    );
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
    let m = env.script(
        "s",
        &[
            "<thought>first look</thought><action>list_dir()</action>",
            "<thought>then <b>answer</b></thought><final_answer>A & B</final_answer>",
        ],
    );
    let o = outcome(
        &env.run(&m, &["--json", "t"])
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
fn a_killed_batch_resumes_with_exactly_one_line_per_task() {
    let env = Env::new();
    let m = env.script(
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
fn tools_lists_what_the_options_enable() {
    let env = Env::new();
    let names = |extra: &[&str]| -> Vec<String> {
        let out = env
            .cmd()
            .args(["tools", "--json", "--workspace"])
            .arg(env.path("ws"))
            .args(extra)
            .assert()
            .code(0)
            .get_output()
            .stdout
            .clone();
        serde_json::from_slice::<Value>(&out)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                assert!(t["parameters"]["type"] == "object" && t["description"].is_string());
                t["name"].as_str().unwrap().to_string()
            })
            .collect()
    };
    assert_eq!(names(&[]), ["read_file", "list_dir", "search_files"]);
    let all = names(&["--allow-write", "--allow-shell"]);
    for n in [
        "write_file",
        "append_file",
        "edit_file",
        "make_dir",
        "move_path",
        "delete_path",
        "run_command",
    ] {
        assert!(all.contains(&n.to_string()), "{n} missing");
    }
}

#[test]
fn prompt_shows_what_the_model_receives() {
    let env = Env::new();
    let out = env
        .cmd()
        .args(["prompt", "--workspace"])
        .arg(env.path("ws"))
        .arg("do it")
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("<final_answer>")
            && text.contains("## read_file(path, start_line, end_line)"),
        "{text}"
    );
    let out = env
        .cmd()
        .args(["prompt", "--api", "completions", "--workspace"])
        .arg(env.path("ws"))
        .arg("do it")
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.ends_with("<question>\ndo it\n</question>\n<thought>"),
        "{text}"
    );
}

#[test]
fn completions_for_shells() {
    let env = Env::new();
    let out = env
        .cmd()
        .args(["completions", "bash"])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    assert!(String::from_utf8_lossy(&out).contains("tagloop"));
}

/// A fake OpenAI-compatible server on loopback, hosted by its own runtime for a sync test.
fn fake_server(cfg: FakeConfig) -> (tokio::runtime::Runtime, FakeServer) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FakeServer::start(cfg));
    (rt, server)
}

#[test]
fn against_a_real_http_server_the_key_is_sent_but_never_written() {
    let env = Env::new();
    let secret = "sk-live-7f3e9a-DO-NOT-LEAK";
    let mut cfg = FakeConfig::turns([
        "<action>list_dir()</action>",
        "<final_answer>listed</final_answer>",
    ]);
    cfg.require_key = Some(secret.into());
    let (_rt, server) = fake_server(cfg);
    for api in ["chat", "completions"] {
        let out = env
            .cmd()
            .args([
                "run",
                "--base-url",
                &server.base_url,
                "--model",
                "fake",
                "--api",
                api,
                "--workspace",
            ])
            .arg(env.path("ws"))
            .args(["--json", "--events", "ev.jsonl", "t"])
            .env("OPENAI_API_KEY", secret)
            .env("RUST_LOG", "trace")
            .assert()
            .get_output()
            .clone();
        let o = outcome(&out.stdout);
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains(secret),
            "the key leaked into stderr"
        );
        assert!(!String::from_utf8_lossy(&out.stdout).contains(secret));
        if api == "chat" {
            assert_eq!(
                o["status"],
                "ok",
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(o["final"], "listed");
        }
    }
    let reqs = server.requests();
    assert!(
        reqs.iter()
            .all(|r| r.authorization.as_deref() == Some(&format!("Bearer {secret}")))
    );
    let mut files = Vec::new();
    all_files(env.dir.path(), &mut files);
    for (p, bytes) in files {
        assert!(
            !String::from_utf8_lossy(&bytes).contains(secret),
            "the key leaked into {}",
            p.display()
        );
    }
    // A wrong key is a runtime error (exit 1) that says what to check, without the key.
    let out = env
        .cmd()
        .args([
            "run",
            "--base-url",
            &server.base_url,
            "--model",
            "fake",
            "--api-key",
            "wrong-key-123",
            "--json",
            "t",
        ])
        .assert()
        .code(1)
        .get_output()
        .clone();
    let o = outcome(&out.stdout);
    assert_eq!(o["status"], "error");
    assert!(!o["error"].as_str().unwrap().contains("wrong-key-123"));
}

#[test]
fn an_unreachable_server_exits_1() {
    let env = Env::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = env
        .cmd()
        .args([
            "run",
            "--base-url",
            &format!("http://127.0.0.1:{port}/v1"),
            "--model",
            "m",
            "--json",
            "t",
        ])
        .assert()
        .code(1)
        .get_output()
        .clone();
    let o = outcome(&out.stdout);
    assert!(
        o["error"].as_str().unwrap().contains("cannot connect"),
        "{o}"
    );
}

/// The Rust MCP test server (`examples/mcp_test_server.rs`, built by `cargo test`).
fn mcp_server_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join("mcp_test_server");
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build --example mcp_test_server`",
        bin.display()
    );
    bin
}

#[test]
fn mcp_servers_attached_with_mcp_are_offered_and_called() {
    let env = Env::new();
    let mcp = format!("{} --name docs-server", mcp_server_bin().display());
    let out = env
        .cmd()
        .args(["tools", "--json", "--no-builtin-tools", "--mcp", &mcp])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let tools: Value = serde_json::from_slice(&out).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"docs_server.echo") && names.contains(&"docs_server.add"),
        "{names:?}"
    );

    let m = env.script(
        "s",
        &[
            "<action>docs_server.add(a=2, b=40)</action>",
            "<final_answer>42</final_answer>",
        ],
    );
    let out = env
        .run(
            &m,
            &["--mcp", &mcp, "--json", "--events", "ev.jsonl", "add"],
        )
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let o = outcome(&out);
    assert_eq!(o["tools_used"], serde_json::json!(["docs_server.add"]));
    let events = std::fs::read_to_string(env.path("ev.jsonl")).unwrap();
    assert!(
        events.contains("\"type\":\"observation\"") && events.contains("42"),
        "the MCP result reached the model"
    );

    // A server that cannot start is a configuration error (exit 2) naming the command.
    let out = env
        .cmd()
        .args([
            "tools",
            "--mcp",
            &format!("{} --exit-at-start", mcp_server_bin().display()),
        ])
        .assert()
        .code(2)
        .get_output()
        .clone();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--exit-at-start"));
}

#[test]
fn roles_workflow_context_and_custom_templates_reach_the_prompt() {
    let env = Env::new();
    std::fs::write(
        env.path("critic.toml"),
        "name = \"critic\"\ninstructions = \"Judge the plan harshly.\"\n[output_schema]\ntype = \"object\"\nrequired = [\"verdict\"]\n",
    )
    .unwrap();
    std::fs::write(
        env.path("ctx.json"),
        r#"[{"name": "plan", "content": "1. write tests\n2. ship"}]"#,
    )
    .unwrap();
    let out = env
        .cmd()
        .args([
            "prompt",
            "--messages",
            "--role",
            "critic.toml",
            "--context",
            "ctx.json",
            "--no-builtin-tools",
            "judge it",
        ])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let msgs: Value = serde_json::from_slice(&out).unwrap();
    let system = msgs[0]["content"].as_str().unwrap();
    assert!(system.starts_with("You are critic."), "{system}");
    assert!(
        system.contains("Judge the plan harshly.") && system.contains("\"verdict\""),
        "{system}"
    );
    assert!(system.contains("You have no tools"), "{system}");
    let user = msgs[1]["content"].as_str().unwrap();
    assert!(
        user.contains("<context name=\"plan\">\n1. write tests\n2. ship\n</context>"),
        "{user}"
    );
    assert!(
        user.ends_with("<question>\njudge it\n</question>"),
        "{user}"
    );

    // A template of the user's own replaces the system prompt; a broken one is a usage error.
    std::fs::write(
        env.path("mine.j2"),
        "Custom prompt for {{ role_name }} with {{ tools | length }} tools.",
    )
    .unwrap();
    let out = env
        .cmd()
        .args(["prompt", "--prompt-template", "mine.j2", "--workspace"])
        .arg(env.path("ws"))
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    assert_eq!(
        String::from_utf8_lossy(&out),
        "Custom prompt for a helpful assistant with 3 tools."
    );
    std::fs::write(env.path("bad.j2"), "{% for %}").unwrap();
    env.cmd()
        .args(["prompt", "--prompt-template", "bad.j2"])
        .assert()
        .code(2);
    std::fs::write(env.path("bad-role.toml"), "name = 3").unwrap();
    env.cmd()
        .args(["prompt", "--role", "bad-role.toml"])
        .assert()
        .code(2);
}

#[test]
fn a_finished_session_continues_with_a_follow_up_question() {
    let env = Env::new();
    let m = env.script(
        "s",
        &[
            "<action>list_dir()</action>",
            "<final_answer>first answer</final_answer>",
            "<thought>The follow-up.</thought><final_answer>second answer</final_answer>",
        ],
    );
    let o = outcome(
        &env.run(&m, &["--json", "first question"])
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
    let m = env.script(
        "s",
        &[
            "<action>list_dir()</action>",
            "<final_answer>a1</final_answer>",
            "<final_answer>a2</final_answer>",
            "<final_answer>a3</final_answer>",
        ],
    );
    let o = outcome(
        &env.run(&m, &["--json", "q1"])
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
    let m = env.script("s", &["<action>list_dir()</action>"]);
    let o = outcome(
        &env.run(&m, &["--json", "t"])
            .assert()
            .code(1)
            .get_output()
            .stdout,
    );
    let id = o["session"].as_str().unwrap().to_string();
    // The "server" comes back with more turns.
    env.script(
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
fn a_key_in_tool_output_is_redacted_and_shell_commands_do_not_inherit_it() {
    let env = Env::new();
    let secret = "sk-proj-REDACT-ME-91c2";
    std::fs::write(env.path("ws/leaky.txt"), format!("token={secret}\n")).unwrap();
    let m = env.script(
        "s",
        &[
            "<action>read_file(path=\"leaky.txt\")</action>",
            "<action>run_command(command=\"echo key=$OPENAI_API_KEY\")</action>",
            "<final_answer>done</final_answer>",
        ],
    );
    let out = env
        .run(
            &m,
            &["--allow-shell", "--json", "--events", "ev.jsonl", "t"],
        )
        .env("OPENAI_API_KEY", secret)
        .assert()
        .code(0)
        .get_output()
        .clone();
    assert!(!String::from_utf8_lossy(&out.stderr).contains(secret));
    let events = std::fs::read_to_string(env.path("ev.jsonl")).unwrap();
    assert!(events.contains("token=[redacted]"), "{events}");
    assert!(
        events.contains("key=\\n") || events.contains("key=\n"),
        "the shell saw no key"
    );
    let mut files = Vec::new();
    all_files(env.dir.path(), &mut files);
    for (p, bytes) in files {
        if p.ends_with("leaky.txt") {
            continue;
        }
        assert!(
            !String::from_utf8_lossy(&bytes).contains(secret),
            "the key leaked into {}",
            p.display()
        );
    }
}

#[test]
fn a_batch_resumes_over_a_line_cut_inside_a_character() {
    let env = Env::new();
    let m = env.script("s", &["<final_answer>é</final_answer>"]);
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
    let model = env.script("s", &["<final_answer>done</final_answer>"]);
    std::fs::write(env.path(".env"), "TAGLOOP_SESSION_DIR=from-dotenv\n").unwrap();
    let out = env
        .run(&model, &["--json", "--quiet", "hi"])
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
        .run(&model, &["--json", "--quiet", "hi"])
        .output()
        .unwrap();
    let id = outcome(&out.stdout)["session"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(env.path("sessions").join(format!("{id}.jsonl")).is_file());
}
