//! A run killed (SIGKILL) while it waits for the model leaves every event before the wait on
//! disk, whole lines only, and `tagloop continue` goes on from there (issue 48: the transcript is
//! opened once and written through a buffer, which is written out before every wait, so no
//! event ever sits only in tagloop's memory while a model request is out).

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use common::cli::Env;
use common::fake_server::{FakeConfig, FakeServer};

/// A fake server on a runtime of its own, for a test that runs the binary.
fn fake_server(cfg: FakeConfig) -> (tokio::runtime::Runtime, FakeServer) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let server = rt.block_on(FakeServer::start(cfg));
    (rt, server)
}

#[test]
fn a_run_killed_during_a_model_request_has_every_earlier_event_on_disk() {
    let env = Env::new();
    std::fs::write(env.path("ws/a.txt"), "forty-two\n").expect("write");
    // Each answer starts 3 s after its request: the kill lands while the second one waits.
    let mut cfg = FakeConfig::turns([
        "<thought>Read a.txt.</thought>\n<action>read_file(path=\"a.txt\")</action>",
        "<final_answer>never sent</final_answer>",
    ]);
    cfg.first_byte_delay = Duration::from_secs(3);
    let (_rt, slow) = fake_server(cfg);
    let mut child = env
        .std_cmd()
        .args(["run", "--base-url", &slow.base_url, "--model", "fake-model"])
        .arg("--workspace")
        .arg(env.path("ws"))
        .args(["--json", "What does a.txt hold?"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(30);
    while slow.turns_served() < 2 {
        assert!(Instant::now() < deadline, "the second turn was never asked");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    assert!(slow.turns_served() == 2, "killed before the second answer");

    let file = std::fs::read_dir(env.path("sessions"))
        .expect("sessions")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .expect("a transcript");
    let text = std::fs::read_to_string(&file).expect("read");
    assert!(text.ends_with('\n'), "the last line is whole: {text}");
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is a record"))
        .collect();
    let kinds: Vec<&str> = records.iter().filter_map(|r| r["type"].as_str()).collect();
    // Everything up to the wait: the first step whole, and the second turn's start.
    assert_eq!(kinds.last(), Some(&"turn_started"), "{kinds:?}");
    assert_eq!(records.last().map(|r| r["step"].clone()), Some(2.into()));
    assert!(kinds.contains(&"step_completed"), "{kinds:?}");
    assert!(text.contains("forty-two"), "the observation is on disk");

    // `continue` sends the model the first step and gets the answer.
    let (_rt2, fast) = fake_server(FakeConfig::turns([
        "<final_answer>a.txt holds forty-two</final_answer>",
    ]));
    let o = env.continue_ok(&[
        "last",
        "--base-url",
        &fast.base_url,
        "--model",
        "fake-model",
    ]);
    assert_eq!(o["status"], "ok");
    assert_eq!(o["final"], "a.txt holds forty-two");
    let asked = fast.requests();
    let last = asked.last().expect("a request").body.to_string();
    assert!(last.contains("forty-two"), "the observation was sent again");
}
