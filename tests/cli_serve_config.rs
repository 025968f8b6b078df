//! `tagloop serve`'s knobs from the `[serve]` section of a config file (issue 45 item 4): the file
//! sets a knob, a flag wins over it, a knob that does not parse is a usage error naming it.

mod common;

use std::process::Command;

use common::serve_proc::Serve;
use serde_json::json;

/// Nothing listens here: a request that gets past the body limit fails upstream (502), one that
/// does not is refused first (413).
const NO_UPSTREAM: &str = "http://127.0.0.1:9/v1";

/// A request body of about 2 KB.
fn ask() -> serde_json::Value {
    json!({
        "model": "m",
        "messages": [{"role": "user", "content": "x".repeat(2000)}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    })
}

/// The status `serve` answers `ask()` with.
async fn status(serve: &Serve) -> u16 {
    reqwest::Client::new()
        .post(format!("{}/chat/completions", serve.base_url))
        .json(&ask())
        .send()
        .await
        .expect("send")
        .status()
        .as_u16()
}

fn config_file(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("tagloop.toml");
    std::fs::write(&path, text).expect("write the config");
    let path = path.display().to_string();
    (dir, path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serve_section_sets_a_knob_and_a_flag_wins_over_it() {
    let (_dir, path) = config_file("[serve]\nmax_body = 1000\ngrammar = \"off\"\n");
    let from_file = Serve::start(NO_UPSTREAM, &["--model", "m", "--config", &path]);
    assert_eq!(status(&from_file).await, 413, "{}", from_file.log());
    let flag_wins = Serve::start(
        NO_UPSTREAM,
        &["--model", "m", "--config", &path, "--max-body", "100000"],
    );
    assert_ne!(status(&flag_wins).await, 413, "{}", flag_wins.log());
    let default = Serve::start(NO_UPSTREAM, &["--model", "m"]);
    assert_ne!(status(&default).await, 413, "{}", default.log());
}

#[test]
fn a_knob_that_does_not_parse_or_an_unknown_one_is_a_usage_error() {
    for (text, says) in [
        (
            "[serve]\nthought = \"loud\"\n",
            "[serve] thought = \"loud\"",
        ),
        (
            "[serve]\nupstream = \"http://x/v1\"\n",
            "unknown field `upstream`",
        ),
    ] {
        let (_dir, path) = config_file(text);
        let out = Command::new(assert_cmd::cargo::cargo_bin("tagloop"))
            .args([
                "serve",
                "--upstream",
                NO_UPSTREAM,
                "--listen",
                "127.0.0.1:0",
            ])
            .args(["--config", &path])
            .output()
            .expect("run tagloop serve");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}
