//! Untrusted input reaching the user interface (issue 9, items 9, 10 and the batch part of 12;
//! issue 21, item 10: a huge transcript line):
//! terminal escapes written by a model or a tool, hostile files in the session directory, and
//! batch inputs that `run` would refuse. Each test reproduces the attack through the binary.

mod common;

use common::cli::Env;

use std::time::Duration;

use serde_json::Value;

/// Title change (OSC 0, ended by BEL), clipboard write (OSC 52), screen clear (CSI 2J), a C1 CSI
/// and a right-to-left override.
const EVIL: &str = "A\x1b]0;pwned\x07B\x1b]52;c;ZWNobyBoaQ==\x07C\x1b[2JD\u{9b}31mE\u{202e}F";

impl Env {
    fn script(&self, turns: &[&str]) -> String {
        common::script::file(&self.path("script.txt"), turns)
    }
}

/// Fails with the offending bytes when `out` holds a raw control or bidi override.
fn assert_no_raw_controls(what: &str, out: &[u8]) {
    let text = String::from_utf8_lossy(out);
    let bad: Vec<char> = text
        .chars()
        .filter(|c| {
            (c.is_control() && !matches!(c, '\n' | '\t'))
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect();
    assert!(bad.is_empty(), "{what} holds raw {bad:?}:\n{text}");
}

#[test]
fn escapes_from_the_model_and_tools_never_reach_the_terminal() {
    let env = Env::new();
    std::fs::write(env.path("ws/evil.txt"), format!("line {EVIL}\n")).unwrap();
    let m = env.script(&[
        &format!("<thought>look {EVIL}</thought><action>read_file(path=\"evil.txt\")</action>"),
        &format!("<thought>done {EVIL}</thought><final_answer>{EVIL}</final_answer>"),
    ]);
    let task = format!("task {EVIL}");
    let run = env
        .cmd()
        .args(["run", "--model", &m, "--workspace"])
        .arg(env.path("ws"))
        .arg(&task)
        .assert()
        .code(0)
        .get_output()
        .clone();
    assert_no_raw_controls("run stderr", &run.stderr);
    assert_no_raw_controls("run stdout", &run.stdout);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.contains(r"A\u{1b}]0;pwned\u{7}B") && stdout.contains(r"E\u{202e}F"),
        "the answer is shown with its controls made visible: {stdout}"
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains(r"line A\u{1b}]0;pwned"), "{stderr}");

    // --json stays exact (serde escapes the controls) and names the session.
    let json = env
        .cmd()
        .args(["run", "--json", "--model", &m, "--workspace"])
        .arg(env.path("ws"))
        .arg(&task)
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    // JSON escapes every C0 control (ESC, BEL); C1 and bidi characters stay as exact UTF-8 text.
    assert!(
        !json.iter().any(|b| *b < 0x20 && *b != b'\n'),
        "raw C0 control in --json"
    );
    let outcome: Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(outcome["final"], EVIL);
    let id = outcome["session"].as_str().unwrap();

    let replay = env
        .cmd()
        .args(["replay", id])
        .assert()
        .code(0)
        .get_output()
        .clone();
    assert_no_raw_controls("replay stderr", &replay.stderr);
    assert_no_raw_controls("replay stdout", &replay.stdout);
    // The replay is on stdout (issue 25, item 2).
    assert!(String::from_utf8_lossy(&replay.stdout).contains(r"\u{1b}[2J"));

    env.cmd()
        .args(["replay", id, "--html", "page.html"])
        .assert()
        .code(0);
    let html = std::fs::read(env.path("page.html")).unwrap();
    assert_no_raw_controls("the HTML page", &html);

    let list = env
        .cmd()
        .arg("sessions")
        .assert()
        .code(0)
        .get_output()
        .clone();
    assert_no_raw_controls("sessions", &list.stdout);
    assert!(String::from_utf8_lossy(&list.stdout).contains(r"task A\u{1b}]0;pwned"));
}

#[test]
fn an_error_message_from_outside_is_neutralised_too() {
    let env = Env::new();
    // The script path is echoed in the error; a hostile name must not drive the terminal.
    let out = env
        .cmd()
        .args([
            "run",
            "--model",
            &format!("scripted:/nonexistent/{EVIL}"),
            "t",
        ])
        .assert()
        .failure()
        .get_output()
        .clone();
    assert_no_raw_controls("the error on stderr", &out.stderr);
}

/// Markup a model or a tool may write, aimed at whoever opens the HTML replay: a script, an
/// event handler, a remote image (a tracking pixel: it would tell a third party the page was
/// opened), a style that loads a remote font, and an early end of the page's own elements.
const MARKUP: &str = "</pre></details></section><script>alert(1)</script>\
<img src=http://127.0.0.1:9/pixel.png onerror=alert(2)>\
<style>@import url(http://127.0.0.1:9/x.css)</style>";

#[test]
fn a_replay_page_shows_markup_as_text_and_may_run_or_load_nothing() {
    let env = Env::new();
    std::fs::write(env.path("ws/evil.html"), format!("{MARKUP}\n").repeat(30)).unwrap();
    let m = env.script(&[
        &format!("<thought>{MARKUP}</thought><action>read_file(path=\"evil.html\")</action>"),
        &format!("<final_answer>{MARKUP}</final_answer>"),
    ]);
    let out = env
        .cmd()
        .args(["run", "--json", "--model", &m, "--workspace"])
        .arg(env.path("ws"))
        .arg(format!("task {MARKUP}"))
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let outcome: Value = serde_json::from_slice(&out).unwrap();
    let id = outcome["session"].as_str().unwrap();
    env.cmd()
        .args(["replay", id, "--html", "page.html"])
        .assert()
        .code(0);
    let html = std::fs::read_to_string(env.path("page.html")).unwrap();
    let lower = html.to_ascii_lowercase();
    for tag in ["<script", "<img", "<iframe"] {
        assert!(
            !lower.contains(tag),
            "a raw {tag} element in the page:\n{html}"
        );
    }
    assert_eq!(
        lower.matches("<style").count(),
        1,
        "only the page's own style:\n{html}"
    );
    // As minijinja's HTML escaping writes it (`/` too).
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"),
        "{html}"
    );
    // Defence in depth, should an escape ever be missed: the page itself forbids scripts and
    // every load from anywhere (styles inline only).
    let csp = "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">";
    assert!(
        html.contains(csp),
        "no content security policy in the page:\n{html}"
    );
    let head_end = html.find("</head>").unwrap();
    assert!(
        html.find(csp).unwrap() < head_end,
        "the policy comes in <head>"
    );
}

/// A good session, a FIFO and a symlink to /dev/zero named like sessions.
fn hostile_session_dir(env: &Env) {
    let m = env.script(&["<final_answer>ok</final_answer>"]);
    env.cmd()
        .args(["run", "--model", &m, "--workspace"])
        .arg(env.path("ws"))
        .arg("the good task")
        .assert()
        .code(0);
    let fifo = env.path("sessions/fifo.jsonl");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    std::os::unix::fs::symlink("/dev/zero", env.path("sessions/zero.jsonl")).unwrap();
}

#[test]
fn sessions_skips_fifos_and_devices_and_lists_the_good_ones() {
    let env = Env::new();
    hostile_session_dir(&env);
    let out = env
        .cmd()
        .timeout(Duration::from_secs(10))
        .arg("sessions")
        .assert()
        .code(0)
        .get_output()
        .clone();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("the good task"), "{text}");
    assert!(!text.contains("fifo") && !text.contains("zero"), "{text}");

    let out = env
        .cmd()
        .timeout(Duration::from_secs(10))
        .args(["sessions", "--json"])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let list: Vec<Value> = serde_json::from_slice(&out).unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["task"], "the good task");

    // Named on purpose, they are refused rather than read.
    for name in ["zero", "fifo"] {
        env.cmd()
            .timeout(Duration::from_secs(10))
            .args(["replay", name])
            .assert()
            .failure();
    }
}

#[test]
fn a_session_file_over_the_size_bound_is_listed_without_being_read() {
    let env = Env::new();
    let f = std::fs::File::create(env.path("sessions/huge.jsonl")).unwrap();
    // Sparse: 65 MiB of zero bytes without using the disk.
    f.set_len((64 << 20) + (1 << 20)).unwrap();
    let out = env
        .cmd()
        .args(["sessions", "--json"])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let list: Vec<Value> = serde_json::from_slice(&out).unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(
        (list[0]["id"].as_str(), list[0]["status"].as_str()),
        (Some("huge"), Some("too_large"))
    );
}

/// Bytes of data (heap and other private writable memory) `tagloop sessions` may use in the
/// test below: about 25 times the 40 MB line, and far below what building a JSON value of it
/// costs (2 GB).
const LISTING_DATA_LIMIT: u64 = 1 << 30;

#[test]
fn a_huge_line_under_the_listing_bound_is_summarised_without_building_it() {
    let env = Env::new();
    // 40 MB in one record: twenty million small numbers, each a 32-byte JSON value when built.
    let n = 20 << 20;
    let mut text = String::with_capacity(2 * n + 300);
    text.push_str(
        "{\"type\":\"run_started\",\"task\":\"the big one\",\"started\":\"2026-01-01T00:00:00Z\"}\n",
    );
    text.push_str("{\"type\":\"message\",\"message\":{\"role\":\"tool\",\"content\":[0");
    for _ in 1..n {
        text.push_str(",0");
    }
    text.push_str("]}}\n{\"type\":\"finished\",\"outcome\":{\"status\":\"ok\",\"steps\":1}}\n");
    std::fs::write(env.path("sessions/big.jsonl"), &text).unwrap();
    drop(text);

    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("tagloop"));
    cmd.args(["sessions", "--json", "--session-dir"])
        .arg(env.path("sessions"));
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: LISTING_DATA_LIMIT as libc::rlim_t,
                rlim_max: LISTING_DATA_LIMIT as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_DATA, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "the listing ran out of its {LISTING_DATA_LIMIT} bytes: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(
        (
            list[0]["task"].as_str(),
            list[0]["status"].as_str(),
            list[0]["steps"].as_u64()
        ),
        (Some("the big one"), Some("ok"), Some(1))
    );
}

fn batch(env: &Env, input: &str) -> (i32, String) {
    std::fs::write(env.path("in.jsonl"), input).unwrap();
    let m = env.script(&["<final_answer>ok</final_answer>"]);
    let out = env
        .cmd()
        .args(["batch", "in.jsonl", "--out", "out.jsonl", "--model", &m])
        .args(["--no-sessions", "--workspace"])
        .arg(env.path("ws"))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn batch_refuses_an_empty_task_like_run_naming_the_line() {
    let env = Env::new();
    let (code, err) = batch(
        &env,
        "{\"id\": \"a\", \"task\": \"fine\"}\n{\"id\": \"b\", \"task\": \"  \\n\"}\n",
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("in.jsonl line 2: the task is empty"),
        "names the line: {err}"
    );
    assert!(
        !env.path("out.jsonl").exists(),
        "no task ran before the input was checked"
    );
}

#[test]
fn batch_ids_1_and_quoted_1_collide_and_the_error_names_both_lines() {
    let env = Env::new();
    let (code, err) = batch(
        &env,
        "{\"id\": 1, \"task\": \"one\"}\n{\"id\": \"x\", \"task\": \"x\"}\n{\"id\": \"1\", \"task\": \"two\"}\n",
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("line 3: the id \"1\" is the same as the id 1")
            && err.contains("first used on line 1"),
        "{err}"
    );
}
