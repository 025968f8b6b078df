//! Attacks on the shared queue from inside Redis: entries tagloop did not write (not JSON, no
//! task, no id, too large) and strings that would drive the terminal (a worker name with escape
//! sequences). Whoever can write to the queue's Redis must not be able to stop every worker, nor
//! write to the terminal of whoever reads `tagloop queue status`.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

mod common;
use common::redis::Redis;

/// Every task answers `ok` at once.
const MODEL: &str = "=== turn ===\n<final_answer>ok</final_answer>\n";

fn tagloop(dir: &Path, args: &[&str]) -> Output {
    Command::new(assert_cmd::cargo::cargo_bin("tagloop"))
        .current_dir(dir)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("TAGLOOP_MODEL")
        .env_remove("TAGLOOP_REDIS_PASSWORD")
        .env("NO_COLOR", "1")
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A plain connection for writing what tagloop never writes.
fn raw(redis: &Redis, name: &str) -> redis::Connection {
    let url = redis.url(name);
    let addr = url.rsplit_once('/').unwrap().0;
    redis::Client::open(addr).unwrap().get_connection().unwrap()
}

fn xadd(c: &mut redis::Connection, queue: &str, fields: &[(&str, &[u8])]) -> String {
    let mut cmd = redis::cmd("XADD");
    cmd.arg(format!("tagloop:{{{queue}}}:tasks")).arg("*");
    for (k, v) in fields {
        cmd.arg(*k).arg(*v);
    }
    cmd.query(c).unwrap()
}

#[test]
fn malformed_entries_become_their_own_error_results_and_the_good_tasks_still_run() {
    let redis = Redis::start();
    let url = redis.url("bad");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("model.txt"), MODEL).unwrap();
    let mut c = raw(&redis, "bad");
    // Bad entries first, so a worker meets them before any good task.
    xadd(
        &mut c,
        "bad",
        &[("id", b"not-json"), ("task", b"{this is not json")],
    );
    xadd(&mut c, "bad", &[("id", b"no-task")]);
    let no_id = xadd(&mut c, "bad", &[("task", br#"{"id": "x", "task": "hi"}"#)]);
    let big = vec![b'a'; 9 << 20];
    xadd(&mut c, "bad", &[("id", b"too-big"), ("task", &big)]);
    xadd(&mut c, "bad", &[("id", b"\xff\xfe"), ("task", b"{}")]);
    let lines: String = (0..3)
        .map(|i| format!("{{\"id\": \"t{i}\", \"task\": \"task {i}\"}}\n"))
        .collect();
    std::fs::write(dir.path().join("in.jsonl"), lines).unwrap();
    let out = tagloop(dir.path(), &["queue", "push", "in.jsonl", "--queue", &url]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let out = tagloop(
        dir.path(),
        &[
            "worker",
            "--queue",
            &url,
            "--name",
            "w",
            "--model",
            "scripted:model.txt",
            "--until-empty",
            "--concurrency",
            "1",
            "--claim-after",
            "0.5",
        ],
    );
    assert!(
        out.status.success(),
        "the worker failed: {}",
        text(&out.stderr)
    );

    let out = tagloop(
        dir.path(),
        &[
            "queue",
            "results",
            "--queue",
            &url,
            "--out",
            "results.jsonl",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let results: Vec<Value> = std::fs::read_to_string(dir.path().join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_id = |id: &str| {
        results
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no result for {id}: {results:?}"))
    };
    for i in 0..3 {
        assert_eq!(by_id(&format!("t{i}"))["status"], "ok");
    }
    // The entry with a bad id is stored under its entry id too: find it by elimination.
    for (id, says) in [
        ("not-json", "not JSON"),
        ("no-task", "no task"),
        (no_id.as_str(), "no id"),
        ("too-big", "larger than"),
    ] {
        let r = by_id(id);
        assert_eq!(r["status"], "error", "{r}");
        let error = r["error"].as_str().unwrap();
        assert!(error.contains(says), "{id}: {error}");
    }
    assert_eq!(results.len(), 8, "{results:?}");
    assert!(
        results
            .iter()
            .any(|r| r["error"].as_str().is_some_and(|e| e.contains("not UTF-8"))),
        "{results:?}"
    );
    // Every entry settled, and the counts add up.
    let out = tagloop(dir.path(), &["queue", "status", "--queue", &url, "--json"]);
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&s["queued"], &s["running"], &s["done"], &s["failed"]),
        (
            &Value::from(0),
            &Value::from(0),
            &Value::from(3),
            &Value::from(5)
        ),
        "{s}"
    );
    let pending: Vec<redis::Value> = redis::cmd("XPENDING")
        .arg("tagloop:{bad}:tasks")
        .arg("workers")
        .arg("-")
        .arg("+")
        .arg(100)
        .query(&mut c)
        .unwrap();
    assert!(pending.is_empty(), "{pending:?}");
}

#[test]
fn worker_names_from_redis_reach_the_terminal_escaped_and_json_exact() {
    let redis = Redis::start();
    let url = redis.url("names");
    let dir = tempfile::tempdir().unwrap();
    let mut c = raw(&redis, "names");
    let evil = "evil\x1b]0;pwned\x07\x1b[2J\u{202e}";
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let _: () = redis::cmd("HSET")
        .arg("tagloop:{names}:workers")
        .arg(evil)
        .arg(now)
        .query(&mut c)
        .unwrap();
    // A field that is not a time, and a name that is not UTF-8: ignored and shown replaced,
    // not a failed status (a worker with --until-empty reads the status too).
    let _: () = redis::cmd("HSET")
        .arg("tagloop:{names}:workers")
        .arg("stray")
        .arg("not a time")
        .arg(b"\xffbytes".as_slice())
        .arg(now)
        .query(&mut c)
        .unwrap();

    let out = tagloop(dir.path(), &["queue", "status", "--queue", &url]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(
        !shown.contains(['\x1b', '\x07', '\u{202e}']),
        "raw control characters reached the terminal: {shown:?}"
    );
    assert!(
        shown.contains(r"evil\u{1b}]0;pwned\u{7}\u{1b}[2J"),
        "{shown}"
    );

    let out = tagloop(dir.path(), &["queue", "status", "--queue", &url, "--json"]);
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        s["worker_names"],
        serde_json::json!([evil, "\u{fffd}bytes"])
    );
}

#[test]
fn push_refuses_a_task_larger_than_an_entry_may_be_and_pushes_nothing() {
    let redis = Redis::start();
    let url = redis.url("big");
    let dir = tempfile::tempdir().unwrap();
    let big = "a".repeat(tagloop::queue::MAX_ENTRY_BYTES);
    std::fs::write(
        dir.path().join("in.jsonl"),
        format!(
            "{{\"id\": \"small\", \"task\": \"x\"}}\n{{\"id\": \"big\", \"task\": \"{big}\"}}\n"
        ),
    )
    .unwrap();
    let out = tagloop(dir.path(), &["queue", "push", "in.jsonl", "--queue", &url]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("task big is"),
        "{}",
        text(&out.stderr)
    );
    let out = tagloop(dir.path(), &["queue", "status", "--queue", &url, "--json"]);
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["queued"], 0, "{s}");
}
