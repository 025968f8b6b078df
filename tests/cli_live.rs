//! The live view of `tagloop run` (issue 25, item 4): what a person sees on stderr when the
//! model server misbehaves. Retries and refused fields are notices on lines of their own, never
//! raw log lines; they are kept in the transcript and shown by the replay page.

mod common;

use common::cli::Env;

use common::fake_server::{FakeConfig, FakeServer};
use serde_json::Value;

/// A fake server that fails the first request (500) and refuses any grammar (400), hosted by its
/// own runtime for a sync test.
fn flaky_server() -> (tokio::runtime::Runtime, FakeServer) {
    let mut cfg = FakeConfig::turns(["<thought>Easy.</thought>\n<final_answer>4</final_answer>"]);
    cfg.fail_first = 1;
    cfg.reject_grammar = true;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FakeServer::start(cfg));
    (rt, server)
}

fn run(env: &Env, server: &FakeServer, rust_log: Option<&str>) -> (String, Value) {
    let mut cmd = env.cmd();
    cmd.args(["run", "--json", "--grammar", "on", "--base-url"])
        .arg(&server.base_url)
        .args(["--model", "fake", "--workspace"])
        .arg(env.path("ws"))
        .arg("what is 2+2");
    if let Some(level) = rust_log {
        cmd.env("RUST_LOG", level);
    }
    let out = cmd.assert().code(0).get_output().clone();
    let outcome: Value = serde_json::from_slice(&out.stdout).unwrap();
    (String::from_utf8(out.stderr).unwrap(), outcome)
}

#[test]
fn server_trouble_is_shown_as_notices_on_their_own_lines_not_log_lines() {
    let env = Env::new();
    let (_rt, server) = flaky_server();
    let (stderr, outcome) = run(&env, &server, None);
    assert_eq!(outcome["final"], "4", "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("◆ retry: model request 1 failed")),
        "{stderr}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("◆ grammar_rejected: ")),
        "{stderr}"
    );
    // Each notice starts its line, and no log line reaches the view by default.
    assert!(
        lines.iter().all(|l| !l.contains('◆') || l.starts_with('◆')),
        "{stderr}"
    );
    assert!(
        !stderr.contains("WARN"),
        "a raw log line in the live view:\n{stderr}"
    );
    assert!(
        stderr.contains("ok · 0 steps · 1 model call · "),
        "{stderr}"
    );

    // The notices are in the transcript, and so in the replay page.
    let id = outcome["session"].as_str().unwrap();
    let page = env.path("replay.html");
    env.cmd()
        .args(["replay", id, "--html"])
        .arg(&page)
        .assert()
        .code(0);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<p class=notice>◆ retry: model request 1 failed"),
        "{html}"
    );
    assert!(
        html.contains("<p class=notice>◆ grammar_rejected: "),
        "{html}"
    );
}

#[test]
fn rust_log_still_shows_the_same_facts_as_log_lines() {
    let env = Env::new();
    let (_rt, server) = flaky_server();
    let (stderr, _) = run(&env, &server, Some("warn"));
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("WARN") && l.contains("model request failed; retrying")),
        "{stderr}"
    );
}
