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
