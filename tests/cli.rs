//! The `tagloop` binary from the outside (assert_cmd): exit codes, `--json` and `--events`, the
//! task from stdin, what `tools` and `prompt` show, shell completions, MCP servers and roles.
//! Sessions that go on are in cli_resume.rs, keys that never leak in security_keys.rs.

mod common;

use serde_json::Value;

use common::cli::{Env, outcome};
use common::mcp_server_bin;

#[test]
fn run_json_prints_exactly_the_outcome_and_exits_0() {
    let env = Env::new();
    let m = env.turns_file(
        "s",
        &[
            "<thought>t</thought><action>list_dir()</action>",
            "<final_answer>done</final_answer>",
        ],
    );
    let out = env
        .run_model(&m, &["--json", "the task"])
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
    let m = env.turns_file(
        "a",
        &[
            "<action>list_dir()</action>",
            "<action>list_dir(path=\"x\")</action>",
        ],
    );
    let o = outcome(
        &env.run_model(&m, &["--json", "--max-steps", "1", "t"])
            .assert()
            .code(3)
            .get_output()
            .stdout,
    );
    assert_eq!(o["status"], "max_steps");
    // loop_detected → 3
    let call = "<action>list_dir()</action>";
    let m = env.turns_file("b", &[call, call, call, call]);
    let o = outcome(
        &env.run_model(&m, &["--json", "t"])
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
    let m = env.turns_file(
        "c",
        &[
            "<final_answer>1</final_answer>",
            "<final_answer>2</final_answer>",
            "<final_answer>3</final_answer>",
        ],
    );
    let o = outcome(
        &env.run_model(&m, &["--json", "--output-schema", "schema.json", "t"])
            .assert()
            .code(3)
            .get_output()
            .stdout,
    );
    assert_eq!(o["status"], "invalid_final");
    // a runtime error (the script runs out) → 1
    let m = env.turns_file("d", &["<action>list_dir()</action>"]);
    let o = outcome(
        &env.run_model(&m, &["--json", "t"])
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
    env.run_model(&m, &[]).assert().code(2); // no task
    env.cmd().args(["run", "--bogus-flag"]).assert().code(2);
    env.cmd().args(["run", "t"]).assert().code(2); // no model at all
    env.cmd()
        .args(["run", "--model", "llama3", "t"])
        .assert()
        .code(2); // a real model needs a server
    env.run_model(&m, &["--role", "missing.toml", "t"])
        .assert()
        .code(2);
}

#[test]
fn the_task_can_come_from_stdin_and_the_answer_goes_to_stdout() {
    let env = Env::new();
    let m = env.turns_file("s", &["<final_answer>from stdin</final_answer>"]);
    let out = env
        .run_model(&m, &["-"])
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
    let m = env.turns_file(
        "s",
        &[
            "<thought>look</thought><action>list_dir()</action>",
            "<final_answer>x</final_answer>",
        ],
    );
    env.run_model(&m, &["--events", "ev.jsonl", "t"])
        .assert()
        .code(0);
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
        .run_model(&m, &["--events", "-", "t"])
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

    let m = env.turns_file(
        "s",
        &[
            "<action>docs_server.add(a=2, b=40)</action>",
            "<final_answer>42</final_answer>",
        ],
    );
    let out = env
        .run_model(
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
