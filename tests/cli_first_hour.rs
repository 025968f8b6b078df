//! The first hour with `tagloop`, from outside: the mistakes a newcomer makes (a missing script,
//! a base URL without `/v1`, no `--model` against a one-model server, a half-written action) each
//! get one clear line that says what to do.

use std::path::PathBuf;

use assert_cmd::Command;

mod common;
use common::fake_server::{FakeConfig, FakeServer};

/// A command in a fresh directory, with none of the variables that would name a server or a
/// model from outside the test.
fn tagloop(dir: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tagloop"));
    c.current_dir(dir)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("TAGLOOP_MODEL")
        .env("TAGLOOP_SESSION_DIR", dir.join("sessions"))
        .env("NO_COLOR", "1");
    c
}

fn stderr_of(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stderr).into_owned()
}

#[test]
fn a_missing_script_is_said_once_on_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let assert = tagloop(dir.path())
        .args(["run", "--model", "scripted:missing.script", "t"])
        .assert()
        .code(2);
    let err = stderr_of(&assert);
    let missing = PathBuf::from("missing.script");
    assert!(
        err.contains(&missing.display().to_string()),
        "the message names the file: {err}"
    );
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line, not a chain of causes: {err}"
    );
    // Once: not "cannot read script X: No such file (os error 2): No such file (os error 2)".
    assert_eq!(
        err.matches("does not exist").count()
            + err.matches("No such file").count()
            + err.matches("not found").count(),
        1,
        "the file is said to be missing exactly once: {err}"
    );
}

#[test]
fn a_missing_role_file_is_said_once_too() {
    let dir = tempfile::tempdir().unwrap();
    let script = common::script::file(
        &dir.path().join("s.script"),
        &["<final_answer>x</final_answer>"],
    );
    let assert = tagloop(dir.path())
        .args(["run", "--model", &script, "--role", "nope.json", "t"])
        .assert()
        .code(2);
    let err = stderr_of(&assert);
    assert!(err.contains("nope.json"), "{err}");
    assert_eq!(err.matches("No such file").count(), 1, "{err}");
}

/// The examples of a tool call in a prompt template, in order: the file each reads and the
/// observation it shows (everything from its `<observation>` to `</observation>`).
fn example_reads(prompt: &str) -> Vec<(String, String)> {
    prompt
        .split("<action>read_file(path=\"")
        .skip(1)
        .map(|call| {
            let path = call.split('"').next().unwrap_or_default().to_string();
            let start = call
                .find("<observation>\n")
                .expect("the example's observation");
            let end = call[start..].find("</observation>").unwrap() + start;
            (path, call[start..end + "</observation>".len()].to_string())
        })
        .collect()
}

/// What the runtime really sends back after `read_file(path=PATH)` as the first step, with the
/// file holding `content`.
fn real_read(dir: &std::path::Path, api: &str, path: &str, content: &str, steps: &str) -> String {
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    let file = dir.join("ws").join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, content).unwrap();
    let script = common::script::file(
        &dir.join(format!("read-{api}.script")),
        &[
            &format!("<thought>t</thought><action>read_file(path=\"{path}\")</action>"),
            "<final_answer>done</final_answer>",
        ],
    );
    let out = tagloop(dir)
        .args([
            "run",
            "-q",
            "--model",
            &script,
            "--api",
            api,
            "--workspace",
            "ws",
        ])
        .args(["--max-steps", steps, "--events", "-", "t"])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["type"] == "observation")
        .and_then(|e| e["text"].as_str().map(str::to_string))
        .expect("an observation event")
}

/// A model copies the worked example; an example that shows what `read_file` never returns
/// (numbered lines) teaches it to expect, and cite, what is not there. The example's file, as
/// its question describes it, read for real, must give the example's observation exactly.
#[test]
fn the_prompts_example_observation_is_what_read_file_really_returns() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    // (api, the files the examples' questions are about, as a file would hold them)
    let cases: [(&str, &[&str]); 2] = [
        (
            "chat",
            &[
                "morning = assam\nevening = chamomile\n",
                "planet,moons\nmars,2\nneptune,16\nuranus,28\n",
            ],
        ),
        ("completions", &["cat: Lina\nplants: Tom\n"]),
    ];
    for (api, contents) in cases {
        for steps in ["10", "2"] {
            let out = tagloop(dir.path())
                .args(["prompt", "--api", api, "--workspace", "ws"])
                .args(["--max-steps", steps, "the task"])
                .assert()
                .success();
            let prompt = String::from_utf8_lossy(&out.get_output().stdout).to_string();
            let examples = example_reads(&prompt);
            assert_eq!(examples.len(), contents.len(), "{api}: {prompt}");
            for ((path, shown), content) in examples.into_iter().zip(contents) {
                let real = real_read(dir.path(), api, &path, content, steps);
                assert_eq!(shown, real, "{api}, {path}, --max-steps {steps}");
            }
        }
    }
}

/// A fake OpenAI-compatible server on loopback, hosted by its own runtime for a sync test.
fn fake_server(cfg: FakeConfig) -> (tokio::runtime::Runtime, FakeServer) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FakeServer::start(cfg));
    (rt, server)
}

fn serving(models: &[&str]) -> FakeConfig {
    let mut cfg = FakeConfig::turns(["<final_answer>hi</final_answer>"]);
    cfg.served_models = Some(models.iter().map(|m| m.to_string()).collect());
    cfg
}

/// llama.cpp serves exactly one model: `--base-url` alone is enough, and the user is told
/// which model was picked.
#[test]
fn without_a_model_the_servers_only_model_is_used_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let (_rt, server) = fake_server(serving(&["qwen2.5-0.5b-instruct-q4_k_m.gguf"]));
    let assert = tagloop(dir.path())
        .args(["run", "--base-url", &server.base_url, "--json", "t"])
        .assert()
        .code(0);
    let err = stderr_of(&assert);
    assert!(
        err.contains("qwen2.5-0.5b-instruct-q4_k_m.gguf"),
        "the picked model is named on stderr: {err}"
    );
    let turns = server.requests();
    assert!(!turns.is_empty());
    for r in turns {
        assert_eq!(r.body["model"], "qwen2.5-0.5b-instruct-q4_k_m.gguf");
    }
    // The list was asked for once (the grammar's detection may ask again: not counted here).
    assert!(!server.model_lists().is_empty());
}

#[test]
fn several_models_or_none_is_exit_2_listing_what_the_server_serves() {
    let dir = tempfile::tempdir().unwrap();
    let (_rt, server) = fake_server(serving(&["llama3.2:1b", "qwen3:4b"]));
    let assert = tagloop(dir.path())
        .args(["run", "--base-url", &server.base_url, "t"])
        .assert()
        .code(2);
    let err = stderr_of(&assert);
    assert!(
        err.contains("llama3.2:1b") && err.contains("qwen3:4b"),
        "{err}"
    );
    assert!(err.contains("--model"), "it says what to do: {err}");
    assert!(server.requests().is_empty(), "no turn was asked for");

    let (_rt2, empty) = fake_server(serving(&[]));
    let assert = tagloop(dir.path())
        .args(["run", "--base-url", &empty.base_url, "t"])
        .assert()
        .code(2);
    let err = stderr_of(&assert);
    assert!(err.contains("--model"), "{err}");

    // A long list is cut, and ids are shown safe for the terminal.
    let many: Vec<String> = (0..50).map(|i| format!("m{i}")).collect();
    let mut ids: Vec<&str> = many.iter().map(String::as_str).collect();
    ids.push("evil\u{1b}]0;pwned\u{7}");
    let (_rt3, crowded) = fake_server(serving(&ids));
    let assert = tagloop(dir.path())
        .args(["run", "--base-url", &crowded.base_url, "t"])
        .assert()
        .code(2);
    let err = stderr_of(&assert);
    assert!(err.contains("m0") && err.contains('…'), "{err}");
    assert!(!err.contains("m45"), "at most ~20 ids: {err}");
    assert!(!err.contains('\u{1b}'), "{err:?}");
}

/// The list is asked for with the key exactly where a turn would send it: with it to a base
/// URL the user gave, without it to one a project's `.env` names (the key rule).
#[test]
fn the_model_list_follows_the_key_rule() {
    let secret = "sk-first-hour-77";
    let dir = tempfile::tempdir().unwrap();
    let (_rt, server) = fake_server(serving(&["only"]));
    tagloop(dir.path())
        .args(["run", "--base-url", &server.base_url, "t"])
        .env("OPENAI_API_KEY", secret)
        .assert()
        .code(0);
    let lists = server.model_lists();
    assert!(!lists.is_empty());
    assert!(
        lists
            .iter()
            .all(|a| a.as_deref() == Some(&format!("Bearer {secret}"))),
        "{lists:?}"
    );

    let project = tempfile::tempdir().unwrap();
    let (_rt2, other) = fake_server(serving(&["only"]));
    std::fs::write(
        project.path().join(".env"),
        format!("OPENAI_BASE_URL={}\n", other.base_url),
    )
    .unwrap();
    tagloop(project.path())
        .args(["run", "t"])
        .env("OPENAI_API_KEY", secret)
        .assert()
        .code(0);
    let lists = other.model_lists();
    assert!(!lists.is_empty());
    assert!(
        lists
            .iter()
            .all(|a| a.is_none() || a.as_deref() == Some("Bearer ")),
        "a project's base URL gets no key: {lists:?}"
    );
}

/// `--base-url http://host:port` (no `/v1`): the 404 says first what to try.
#[test]
fn a_404_from_a_base_url_without_v1_says_to_add_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_rt, server) = fake_server(FakeConfig::turns(["<final_answer>x</final_answer>"]));
    let root = server.base_url.trim_end_matches("/v1").to_string();
    let assert = tagloop(dir.path())
        .args(["run", "--base-url", &root, "--model", "m", "--json", "t"])
        .assert()
        .code(1);
    let out: serde_json::Value =
        serde_json::from_slice(&assert.get_output().stdout).expect("one JSON outcome");
    let error = out["error"].as_str().unwrap_or_default();
    let expected = format!(
        "the server answered 404 at {root}: most servers serve the OpenAI API under /v1 — try --base-url {root}/v1"
    );
    assert!(error.starts_with(&expected), "{error}");
    // Without a model, the list of models says the same.
    let assert = tagloop(dir.path())
        .args(["run", "--base-url", &root, "t"])
        .assert()
        .code(1);
    let err = stderr_of(&assert);
    assert!(err.contains(&expected), "{err}");
    // With /v1, a 404 is about the model.
    let mut cfg = FakeConfig::turns(["<final_answer>x</final_answer>"]);
    cfg.known_models = vec!["real".into()];
    let (_rt2, server) = fake_server(cfg);
    let assert = tagloop(dir.path())
        .args([
            "run",
            "--base-url",
            &server.base_url,
            "--model",
            "nope",
            "--json",
            "t",
        ])
        .assert()
        .code(1);
    let out: serde_json::Value = serde_json::from_slice(&assert.get_output().stdout).unwrap();
    let error = out["error"].as_str().unwrap_or_default();
    assert!(error.contains("check --model"), "{error}");
    assert!(!error.contains("try --base-url"), "{error}");
}

/// A model picked from the server is what the session records, so `continue` goes on with it
/// (and asks no server which model to use) even when the server has changed its list since.
#[test]
fn a_picked_model_is_recorded_for_continue() {
    let dir = tempfile::tempdir().unwrap();
    let (_rt, server) = fake_server(serving(&["picked-model.gguf"]));
    tagloop(dir.path())
        .args(["run", "--base-url", &server.base_url, "--json", "t"])
        .assert()
        .code(0);
    let sessions = dir.path().join("sessions");
    let file = std::fs::read_dir(&sessions)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .expect("a transcript");
    let first = std::fs::read_to_string(&file).unwrap();
    let started: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    assert_eq!(started["meta"]["model"], "picked-model.gguf", "{started}");
}
