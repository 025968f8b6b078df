//! The first hour with `tagloop`, from outside: the mistakes a newcomer makes (a missing script,
//! a base URL without `/v1`, no `--model` against a one-model server, a half-written action) each
//! get one clear line that says what to do.

use std::path::PathBuf;

use assert_cmd::Command;

mod common;

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

/// The example of a tool call in a prompt template: the file it reads and the observation it
/// shows (everything from `<observation>` to `</observation>`).
fn example_read(prompt: &str) -> (String, String) {
    let call = prompt
        .split("<action>read_file(path=\"")
        .nth(1)
        .expect("the prompt has a read_file example");
    let path = call.split('"').next().unwrap_or_default().to_string();
    let start = prompt.find("<observation>\n").expect("the example's observation");
    let end = prompt[start..].find("</observation>").unwrap() + start;
    (path, prompt[start..end + "</observation>".len()].to_string())
}

/// What the runtime really sends back after `read_file(path=PATH)` as the first step, with the
/// file holding `content`.
fn real_read(dir: &std::path::Path, api: &str, path: &str, content: &str, steps: &str) -> String {
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(dir.join("ws").join(path), content).unwrap();
    let script = common::script::file(
        &dir.join(format!("read-{api}.script")),
        &[
            &format!("<thought>t</thought><action>read_file(path=\"{path}\")</action>"),
            "<final_answer>done</final_answer>",
        ],
    );
    let out = tagloop(dir)
        .args(["run", "-q", "--model", &script, "--api", api, "--workspace", "ws"])
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
    // (api, the file the example's question is about, as a file would hold it)
    let cases = [
        ("chat", "first line\nsecond line\n"),
        ("completions", "[web]\nhost = \"0.0.0.0\"\nport = 9090\n"),
    ];
    for (api, content) in cases {
        for steps in ["10", "2"] {
            let out = tagloop(dir.path())
                .args(["prompt", "--api", api, "--workspace", "ws"])
                .args(["--max-steps", steps, "the task"])
                .assert()
                .success();
            let prompt = String::from_utf8_lossy(&out.get_output().stdout).to_string();
            let (path, shown) = example_read(&prompt);
            let real = real_read(dir.path(), api, &path, content, steps);
            assert_eq!(shown, real, "{api}, --max-steps {steps}");
        }
    }
}
