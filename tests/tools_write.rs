//! The built-in tools that change things: success cases and each refusal of the file writes,
//! moves and deletes, confirm mode before each of them and each command, and `run_command`
//! (exit codes, caps, time limits, process groups). The reading tools are in tools_builtin.rs.

mod common;

use std::fs;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::json;
use tagloop::tools::{Confirm, FixedConfirm, Limits, TerminalConfirm, ToolkitOptions};

use common::tools::{env_rw, env_with, failed, no_temp_files, refused};

// ------------------------------------------------------------------------------------------
// write_file / append_file

#[tokio::test]
async fn write_file_creates_replaces_and_makes_parents() {
    let env = env_rw();
    let r = env
        .call(
            "write_file",
            json!({"path": "new/deep/f.txt", "content": "hello\n"}),
        )
        .await
        .expect("ok");
    assert!(r.contains("new file"), "{r}");
    assert_eq!(env.read("new/deep/f.txt"), "hello\n");
    let r = env
        .call(
            "write_file",
            json!({"path": "new/deep/f.txt", "content": "bye"}),
        )
        .await
        .expect("ok");
    assert!(r.contains("replaced 6 bytes"), "{r}");
    assert_eq!(env.read("new/deep/f.txt"), "bye");
    no_temp_files(&env.p("new/deep"));
    // Permissions of an existing file survive the atomic replace.
    use std::os::unix::fs::PermissionsExt;
    env.write("run.sh", "#!/bin/sh\n");
    fs::set_permissions(env.p("run.sh"), fs::Permissions::from_mode(0o755)).expect("chmod");
    env.call(
        "write_file",
        json!({"path": "run.sh", "content": "#!/bin/sh\necho hi\n"}),
    )
    .await
    .expect("ok");
    let mode = fs::metadata(env.p("run.sh"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    // A folder cannot be overwritten.
    fs::create_dir(env.p("dir")).expect("mkdir");
    let r = env
        .call("write_file", json!({"path": "dir", "content": "x"}))
        .await;
    assert!(failed(&r).contains("folder"), "{r:?}");
    assert!(env.p("dir").is_dir());
    // Writing under a file fails.
    let r = env
        .call("write_file", json!({"path": "run.sh/x", "content": "x"}))
        .await;
    assert!(r.is_err(), "{r:?}");
}

#[tokio::test]
async fn append_file_creates_and_appends() {
    let env = env_rw();
    env.call(
        "append_file",
        json!({"path": "logs/a.log", "content": "one\n"}),
    )
    .await
    .expect("ok");
    let r = env
        .call(
            "append_file",
            json!({"path": "logs/a.log", "content": "two\n"}),
        )
        .await
        .expect("ok");
    assert!(r.contains("now 8 bytes"), "{r}");
    assert_eq!(env.read("logs/a.log"), "one\ntwo\n");
    no_temp_files(&env.p("logs"));
    fs::create_dir(env.p("d")).expect("mkdir");
    let r = env
        .call("append_file", json!({"path": "d", "content": "x"}))
        .await;
    assert!(failed(&r).contains("folder"), "{r:?}");
}

// ------------------------------------------------------------------------------------------
// edit_file

#[tokio::test]
async fn edit_file_replaces_exactly_one_match() {
    let env = env_rw();
    env.write("c.rs", "fn a() {\n    1\n}\nfn b() {\n    1\n}\n");
    let r = env
        .call(
            "edit_file",
            json!({"path": "c.rs", "old": "fn b() {\n    1", "new": "fn b() {\n    2"}),
        )
        .await
        .expect("ok");
    assert!(r.contains("line 4"), "{r}");
    assert_eq!(env.read("c.rs"), "fn a() {\n    1\n}\nfn b() {\n    2\n}\n");
    no_temp_files(&env.root);
}

#[tokio::test]
async fn edit_file_refuses_zero_or_several_matches() {
    let env = env_rw();
    let original = "x = 1\ny = 1\nz = 2\n";
    env.write("v.py", original);
    let r = env
        .call(
            "edit_file",
            json!({"path": "v.py", "old": "= 1", "new": "= 3"}),
        )
        .await;
    let m = refused(&r);
    assert!(m.contains("2 times") && m.contains("lines 1, 2"), "{m}");
    let r = env
        .call(
            "edit_file",
            json!({"path": "v.py", "old": "w = 9", "new": "w = 3"}),
        )
        .await;
    assert!(refused(&r).contains("not found"), "{r:?}");
    let r = env
        .call(
            "edit_file",
            json!({"path": "v.py", "old": "  z = 2  ", "new": "z"}),
        )
        .await;
    assert!(refused(&r).contains("whitespace"), "{r:?}");
    let r = env
        .call("edit_file", json!({"path": "v.py", "old": "", "new": "z"}))
        .await;
    assert!(refused(&r).contains("empty"), "{r:?}");
    assert_eq!(env.read("v.py"), original);
    let r = env
        .call(
            "edit_file",
            json!({"path": "missing.py", "old": "a", "new": "b"}),
        )
        .await;
    assert!(failed(&r).contains("not found"), "{r:?}");
    assert!(!env.p("missing.py").exists());
}

// ------------------------------------------------------------------------------------------
// make_dir / move_path / delete_path

#[tokio::test]
async fn make_dir_cases() {
    let env = env_rw();
    let r = env
        .call("make_dir", json!({"path": "a/b/c"}))
        .await
        .expect("ok");
    assert!(r.contains("created"), "{r}");
    assert!(env.p("a/b/c").is_dir());
    let r = env
        .call("make_dir", json!({"path": "a/b"}))
        .await
        .expect("ok");
    assert!(r.contains("already exists"), "{r}");
    env.write("f", "x");
    let r = env.call("make_dir", json!({"path": "f"})).await;
    assert!(failed(&r).contains("not a folder"), "{r:?}");
}

#[tokio::test]
async fn move_path_cases() {
    let env = env_rw();
    env.write("a.txt", "A");
    env.write("b.txt", "B");
    let r = env
        .call(
            "move_path",
            json!({"from": "a.txt", "to": "sub/dir/a2.txt"}),
        )
        .await
        .expect("ok");
    assert!(r.contains("moved"), "{r}");
    assert!(!env.p("a.txt").exists());
    assert_eq!(env.read("sub/dir/a2.txt"), "A");
    // Target exists: refused, nothing changes.
    let r = env
        .call(
            "move_path",
            json!({"from": "b.txt", "to": "sub/dir/a2.txt"}),
        )
        .await;
    assert!(failed(&r).contains("already exists"), "{r:?}");
    assert_eq!(env.read("b.txt"), "B");
    assert_eq!(env.read("sub/dir/a2.txt"), "A");
    let r = env
        .call("move_path", json!({"from": "nope", "to": "x"}))
        .await;
    assert!(failed(&r).contains("not found"), "{r:?}");
    let r = env
        .call("move_path", json!({"from": "sub", "to": "sub/dir/inner"}))
        .await;
    assert!(failed(&r).contains("into itself"), "{r:?}");
    // Folders move too.
    env.call("move_path", json!({"from": "sub", "to": "moved"}))
        .await
        .expect("ok");
    assert_eq!(env.read("moved/dir/a2.txt"), "A");
    let r = env.call("move_path", json!({"from": ".", "to": "x"})).await;
    assert!(refused(&r).contains("root"), "{r:?}");
}

#[tokio::test]
async fn delete_path_cases() {
    let env = env_rw();
    env.write("f.txt", "x");
    env.write("d/e/g.txt", "y");
    let r = env
        .call("delete_path", json!({"path": "f.txt"}))
        .await
        .expect("ok");
    assert!(r.contains("deleted"), "{r}");
    assert!(!env.p("f.txt").exists());
    let r = env
        .call("delete_path", json!({"path": "d"}))
        .await
        .expect("ok");
    assert!(r.contains("folder"), "{r}");
    assert!(!env.p("d").exists());
    let r = env.call("delete_path", json!({"path": "nope"})).await;
    assert!(failed(&r).contains("not found"), "{r:?}");
    for root in [".", "", "./", "a/..", &env.root.to_string_lossy()] {
        fs::create_dir_all(env.p("a")).expect("mkdir");
        let r = env.call("delete_path", json!({"path": root})).await;
        assert!(refused(&r).contains("root"), "{root}: {r:?}");
        assert!(env.root.is_dir());
    }
}

// ------------------------------------------------------------------------------------------
// Confirm mode

struct Recorder {
    answer: bool,
    asked: Mutex<Vec<String>>,
}

impl Confirm for Recorder {
    fn confirm<'a>(&'a self, what: &'a str) -> BoxFuture<'a, bool> {
        self.asked.lock().expect("lock").push(what.to_string());
        Box::pin(std::future::ready(self.answer))
    }
}

#[tokio::test]
async fn confirm_is_asked_before_each_write_and_command() {
    let rec = Arc::new(Recorder {
        answer: true,
        asked: Mutex::new(Vec::new()),
    });
    let env = env_with(ToolkitOptions {
        allow_write: true,
        allow_shell: true,
        confirm: Some(rec.clone()),
        ..ToolkitOptions::default()
    });
    env.call(
        "write_file",
        json!({"path": "a.txt", "content": "hello world"}),
    )
    .await
    .expect("ok");
    env.call("append_file", json!({"path": "a.txt", "content": "!"}))
        .await
        .expect("ok");
    env.call(
        "edit_file",
        json!({"path": "a.txt", "old": "world", "new": "there"}),
    )
    .await
    .expect("ok");
    env.call("make_dir", json!({"path": "d"}))
        .await
        .expect("ok");
    env.call("move_path", json!({"from": "a.txt", "to": "d/a.txt"}))
        .await
        .expect("ok");
    env.call("run_command", json!({"command": "echo hi"}))
        .await
        .expect("ok");
    env.call("delete_path", json!({"path": "d"}))
        .await
        .expect("ok");
    // Reads never ask.
    env.call("list_dir", json!({})).await.expect("ok");
    let asked = rec.asked.lock().expect("lock").clone();
    assert_eq!(asked.len(), 7, "{asked:#?}");
    assert!(
        asked[0].contains("write_file")
            && asked[0].contains("a.txt")
            && asked[0].contains("hello world")
    );
    assert!(asked[1].starts_with("append_file"));
    assert!(asked[2].contains("world") && asked[2].contains("there"));
    assert!(asked[3].contains("make_dir"));
    assert!(asked[4].contains("d/a.txt"));
    assert!(asked[5].contains("echo hi"));
    assert!(asked[6].contains("delete folder `d`"));
}

#[tokio::test]
async fn declined_actions_are_refused_and_change_nothing() {
    let env = env_with(ToolkitOptions {
        allow_write: true,
        allow_shell: true,
        confirm: Some(Arc::new(FixedConfirm(false))),
        ..ToolkitOptions::default()
    });
    env.write("keep.txt", "keep");
    let cases = [
        ("write_file", json!({"path": "new.txt", "content": "x"})),
        ("append_file", json!({"path": "keep.txt", "content": "x"})),
        (
            "edit_file",
            json!({"path": "keep.txt", "old": "keep", "new": "gone"}),
        ),
        ("make_dir", json!({"path": "nd"})),
        ("move_path", json!({"from": "keep.txt", "to": "moved.txt"})),
        ("delete_path", json!({"path": "keep.txt"})),
        ("run_command", json!({"command": "touch ran.txt"})),
    ];
    for (name, args) in cases {
        let r = env.call(name, args).await;
        assert!(refused(&r).contains("declined"), "{name}: {r:?}");
    }
    assert_eq!(env.read("keep.txt"), "keep");
    let mut entries: Vec<String> = fs::read_dir(&env.root)
        .expect("read_dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert_eq!(entries, ["keep.txt"]);
}

#[tokio::test]
async fn terminal_confirm_declines_without_a_terminal() {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        eprintln!("note: stdin is a terminal, skipping the non-terminal check");
        return;
    }
    let t0 = std::time::Instant::now();
    assert!(!TerminalConfirm::new().confirm("write_file: x").await);
    assert!(t0.elapsed() < Duration::from_secs(2));
}

// ------------------------------------------------------------------------------------------
// run_command

#[tokio::test]
async fn run_command_reports_exit_code_and_streams() {
    let env = env_rw();
    env.write("hello.txt", "hi there");
    let out = env
        .call(
            "run_command",
            json!({"command": "cat hello.txt; echo; pwd"}),
        )
        .await
        .expect("ok");
    assert!(out.starts_with("exit code: 0"), "{out}");
    assert!(out.contains("--- stdout ---\nhi there\n"), "{out}");
    assert!(
        out.contains(&env.root.to_string_lossy().into_owned()),
        "{out}"
    );
    assert!(!out.contains("stderr"), "{out}");
    let out = env
        .call("run_command", json!({"command": "echo oops >&2; exit 3"}))
        .await
        .expect("ok");
    assert!(out.starts_with("exit code: 3"), "{out}");
    assert!(out.contains("--- stderr ---\noops"), "{out}");
    let out = env
        .call("run_command", json!({"command": "true"}))
        .await
        .expect("ok");
    assert_eq!(out, "exit code: 0 (no output)");
    // stdin is empty: cat does not wait.
    let out = env
        .call("run_command", json!({"command": "cat"}))
        .await
        .expect("ok");
    assert!(out.starts_with("exit code: 0"), "{out}");
    let r = env.call("run_command", json!({"command": "  "})).await;
    assert!(failed(&r).contains("empty"), "{r:?}");
    let r = env
        .call("run_command", json!({"command": "true", "timeout_s": 0}))
        .await;
    assert!(failed(&r).contains("timeout_s"), "{r:?}");
}

#[tokio::test]
async fn run_command_caps_output_with_a_marker() {
    let env = env_with(ToolkitOptions {
        allow_shell: true,
        limits: Limits {
            command_output_max_bytes: 1000,
            ..Limits::default()
        },
        ..ToolkitOptions::default()
    });
    let out = env
        .call(
            "run_command",
            json!({"command": "i=0; while [ $i -lt 5000 ]; do echo line$i; i=$((i+1)); done"}),
        )
        .await
        .expect("ok");
    assert!(out.contains("line0\n"), "{out}");
    assert!(out.contains("line4999"), "{out}");
    assert!(out.contains("output cut"), "{out}");
    assert!(out.len() < 1300, "{}", out.len());
}

fn pid_alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

async fn wait_dead(pid: i32) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while pid_alive(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "process {pid} survived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn run_command_timeout_kills_the_whole_process_group() {
    let env = env_rw();
    let t0 = std::time::Instant::now();
    let r = env
        .call(
            "run_command",
            json!({"command": "sleep 300 & echo $! > child.pid; echo started; wait", "timeout_s": 1}),
        )
        .await;
    let m = failed(&r);
    assert!(
        m.contains("timed out after 1 s") && m.contains("started"),
        "{m}"
    );
    assert!(t0.elapsed() < Duration::from_secs(10));
    let pid: i32 = env.read("child.pid").trim().parse().expect("pid");
    wait_dead(pid).await;
}

#[tokio::test]
async fn run_command_leaves_no_background_process() {
    let env = env_rw();
    let out = env
        .call(
            "run_command",
            json!({"command": "sleep 300 > /dev/null 2>&1 & echo $!"}),
        )
        .await
        .expect("ok");
    let pid: i32 = out
        .lines()
        .find_map(|l| l.trim().parse().ok())
        .expect("pid in output");
    wait_dead(pid).await;
}

#[tokio::test]
async fn run_command_cancelled_kills_the_group() {
    let env = env_rw();
    let call = env.call(
        "run_command",
        json!({"command": "sleep 300 & echo $! > bg.pid; wait", "timeout_s": 100}),
    );
    // Dropping the future (a cancelled run) must not leave the command behind.
    let _ = tokio::time::timeout(Duration::from_millis(700), call).await;
    let pid: i32 = env.read("bg.pid").trim().parse().expect("pid");
    wait_dead(pid).await;
}
