//! Issue 9, items 3 and 7: what tagloop's children can see of its keys and how long they live,
//! and (item 8) the command line's gates on MCP writes. Every test here reproduces an attack that
//! worked before the fix. The library's MCP gates are in security_mcp.rs.
//!
//! Processes are found by pids the commands write into their workspace; "gone" means the pid no
//! longer exists or is a zombie (a zombie runs nothing; init in a container may be slow to reap).

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use tagloop::tools::ChildEnv;
use tagloop::tools::run_shell;

use common::mcp_server_bin;

const OPENAI_KEY: &str = "sk-openai-SECRET-1234567890abcdef";

const OTHER_KEY: &str = "sk-other-SECRET-0987654321fedcba";

fn tagloop_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tagloop"))
}

/// Whether `pid` is a live (non-zombie) process.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// The children of `parent` whose command name is `name`.
fn children_named(parent: u32, name: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let ppid = stat[close + 1..].split_whitespace().nth(1);
        if &stat[open + 1..close] == name && ppid == Some(&parent.to_string()) {
            found.push(pid);
        }
    }
    found
}

/// Wait (bounded) until `pid` is gone.
fn gone_within(pid: u32, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    !alive(pid)
}

/// Wait (bounded) for a file with a pid in it.
fn read_pid(path: &Path, limit: Duration) -> u32 {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(
            start.elapsed() < limit,
            "{} never got a pid",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kill a leftover so a failing test does not leave a sleeper behind.
fn cleanup(pid: u32) {
    if alive(pid) {
        let _ = StdCommand::new("kill")
            .arg("-9")
            .arg(pid.to_string())
            .status();
    }
}

fn script(dir: &Path, turns: &[&str]) -> String {
    common::script::file(&dir.join("script.txt"), turns)
}

/// A scratch directory with `ws/` and `sessions/`, open to every user (the /proc test runs
/// tagloop as `nobody` when the tests run as root).
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for sub in ["ws", "sessions"] {
        std::fs::create_dir(dir.path().join(sub)).expect("mkdir");
    }
    for p in [
        dir.path().to_path_buf(),
        dir.path().join("ws"),
        dir.path().join("sessions"),
    ] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    dir
}

fn tagloop(dir: &Path) -> StdCommand {
    let mut c = StdCommand::new(tagloop_bin());
    c.current_dir(dir)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("TAGLOOP_MODEL")
        .env("HOME", dir)
        .env("TAGLOOP_SESSION_DIR", dir.join("sessions"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    c
}

// ---------------------------------------------------------------------------------------------
// Item 7: children do not outlive their command or tagloop.

#[tokio::test]
async fn a_timed_out_command_loses_its_setsid_children() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_shell(
        "setsid sleep 301 & echo $! > bg.pid; sleep 30",
        dir.path(),
        Duration::from_millis(800),
        4096,
        &ChildEnv::new(),
    )
    .await
    .expect("runs");
    assert!(out.timed_out);
    let pid = read_pid(&dir.path().join("bg.pid"), Duration::from_secs(5));
    let gone = gone_within(pid, Duration::from_secs(5));
    cleanup(pid);
    assert!(
        gone,
        "the setsid child {pid} of a timed-out command is still running"
    );
}

#[test]
fn a_background_process_does_not_outlive_its_command() {
    let dir = scratch();
    let ws = dir.path().join("ws");
    let model = script(
        dir.path(),
        &[
            r#"<action>run_command(command="setsid sleep 302 > /dev/null 2>&1 & echo $! > bg.pid; echo started")</action>"#,
            r#"<action>run_command(command="sleep 1; echo state=$(cut -d' ' -f3 /proc/$(cat bg.pid)/stat 2>/dev/null)")</action>"#,
            "<final_answer>done</final_answer>",
        ],
    );
    let out = tagloop(dir.path())
        .args(["run", "--model", &model, "--allow-shell", "--events"])
        .arg(dir.path().join("ev.jsonl"))
        .arg("--workspace")
        .arg(&ws)
        .arg("task")
        .output()
        .expect("tagloop runs");
    let pid = read_pid(&ws.join("bg.pid"), Duration::from_secs(1));
    let still = alive(pid);
    cleanup(pid);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = std::fs::read_to_string(dir.path().join("ev.jsonl")).expect("events");
    // While tagloop still ran, the second command saw the first one's sleeper gone (or a zombie).
    assert!(
        events.contains("state=\\n") || events.contains("state=Z"),
        "the background process of the first command was still running during the second: {events}"
    );
    assert!(!still, "the background process {pid} outlived tagloop");
}

/// tagloop runs a command that starts a setsid grandchild and a plain child, then gets `signal`.
fn signalled_tagloop_leaves_nothing(signal: &str, expected_code: Option<i32>) {
    let dir = scratch();
    let ws = dir.path().join("ws");
    let model = script(
        dir.path(),
        &[
            r#"<action>run_command(command="echo $$ > sh.pid; setsid sleep 303 > /dev/null 2>&1 & echo $! > bg.pid; sleep 304 & echo $! > fg.pid; wait", timeout_s=120)</action>"#,
            "<final_answer>done</final_answer>",
        ],
    );
    let mcp = format!("'{}'", mcp_server_bin().display());
    let mut child = tagloop(dir.path())
        .args([
            "run",
            "--model",
            &model,
            "--allow-shell",
            "--quiet",
            "--mcp",
            &mcp,
        ])
        .arg("--workspace")
        .arg(&ws)
        .arg("task")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tagloop starts");
    let sh = read_pid(&ws.join("sh.pid"), Duration::from_secs(30));
    let bg = read_pid(&ws.join("bg.pid"), Duration::from_secs(30));
    let fg = read_pid(&ws.join("fg.pid"), Duration::from_secs(30));
    assert!(alive(bg) && alive(fg), "the command's processes started");
    let server = children_named(child.id(), "mcp_test_server");
    assert_eq!(server.len(), 1, "the MCP server runs");
    let ok = StdCommand::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .expect("kill");
    assert!(ok.success());
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("tagloop did not exit after SIG{signal}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let results: Vec<(u32, bool)> = [sh, bg, fg, server[0]]
        .into_iter()
        .map(|p| (p, gone_within(p, Duration::from_secs(5))))
        .collect();
    for (p, _) in &results {
        cleanup(*p);
    }
    if let Some(code) = expected_code {
        assert_eq!(status.code(), Some(code), "exit status after SIG{signal}");
    }
    for (p, gone) in results {
        assert!(gone, "process {p} outlived tagloop after SIG{signal}");
    }
}

#[test]
fn sigterm_kills_every_descendant() {
    signalled_tagloop_leaves_nothing("TERM", Some(143));
}

#[test]
fn sighup_kills_every_descendant() {
    signalled_tagloop_leaves_nothing("HUP", Some(129));
}

#[test]
fn sigint_kills_every_descendant() {
    // The command runs in its own process group, so a terminal's Ctrl-C reaches only tagloop.
    signalled_tagloop_leaves_nothing("INT", Some(130));
}

/// SIGKILL cannot be handled: the direct child (the shell) dies through `PR_SET_PDEATHSIG`, but a
/// `setsid` grandchild survives (documented). This test checks the part tagloop can promise.
#[test]
fn sigkill_takes_the_direct_children_along() {
    let dir = scratch();
    let ws = dir.path().join("ws");
    let model = script(
        dir.path(),
        &[
            r#"<action>run_command(command="echo $$ > sh.pid; sleep 305 & echo $! > gc.pid; wait", timeout_s=120)</action>"#,
            "<final_answer>done</final_answer>",
        ],
    );
    let mut child = tagloop(dir.path())
        .args(["run", "--model", &model, "--allow-shell", "--quiet"])
        .arg("--workspace")
        .arg(&ws)
        .arg("task")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tagloop starts");
    let sh = read_pid(&ws.join("sh.pid"), Duration::from_secs(30));
    let grandchild = read_pid(&ws.join("gc.pid"), Duration::from_secs(30));
    assert!(alive(sh));
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let gone = gone_within(sh, Duration::from_secs(5));
    cleanup(sh);
    // The shell's own child survives a SIGKILLed tagloop (the documented limit): clean it up.
    cleanup(grandchild);
    assert!(gone, "the shell {sh} outlived a SIGKILLed tagloop");
}

// ---------------------------------------------------------------------------------------------
// Item 3: no key reaches a child, and tagloop's /proc is out of reach.

/// Whether the tests run as root, and can drop to `nobody` with `setpriv`.
fn as_nobody() -> Option<Vec<String>> {
    let uid = StdCommand::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some(vec![]);
    }
    let ok = StdCommand::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "true"])
        .status()
        .ok()?
        .success();
    ok.then(|| {
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
        ]
        .map(String::from)
        .to_vec()
    })
}

#[test]
fn the_shell_sees_no_key_in_its_environment_or_in_tagloops_proc() {
    let dir = scratch();
    let ws = dir.path().join("ws");
    // A provider whose key lives in a variable of its own; tagloop knows it from the config.
    std::fs::write(
        dir.path().join("tagloop.toml"),
        "[providers.other]\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"OTHER_PROVIDER_KEY\"\n",
    )
    .expect("config");
    // tagloop must be executable by `nobody`: copy it into the open scratch directory.
    let bin = dir.path().join("tagloop");
    std::fs::copy(tagloop_bin(), &bin).expect("copy tagloop");
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let model = script(
        dir.path(),
        &[
            concat!(
                r#"<action>run_command(command="env > env.txt; "#,
                r#"cat /proc/$PPID/environ > environ.bin 2> environ.err; "#,
                r#"cat /proc/$PPID/cmdline > cmdline.bin; "#,
                r#"base64 /proc/$PPID/environ > environ.b64 2>&1; "#,
                r#"head -c 64 /proc/$PPID/mem > mem.bin 2> mem.err; echo done")</action>"#
            ),
            "<final_answer>done</final_answer>",
        ],
    );
    let prefix = as_nobody();
    let mut cmd = match &prefix {
        Some(p) if !p.is_empty() => {
            let mut c = StdCommand::new(&p[0]);
            c.args(&p[1..]).arg(&bin);
            c
        }
        _ => StdCommand::new(&bin),
    };
    let out = cmd
        .current_dir(dir.path())
        .env_remove("OPENAI_BASE_URL")
        .env_remove("TAGLOOP_MODEL")
        .env("HOME", dir.path())
        .env("TAGLOOP_SESSION_DIR", dir.path().join("sessions"))
        .env("OPENAI_API_KEY", OPENAI_KEY)
        .env("OTHER_PROVIDER_KEY", OTHER_KEY)
        .env("COPY_OF_THE_KEY", format!("prefix {OPENAI_KEY} suffix"))
        .env("TAGLOOP_DEPLOY_TOKEN", "tagloop-token-value-42")
        .env("HARMLESS_VARIABLE", "still-here")
        .args(["run", "--model", &model, "--allow-shell", "--quiet"])
        .arg("--workspace")
        .arg(&ws)
        .arg("task")
        .stdin(Stdio::null())
        .output()
        .expect("tagloop runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let env = std::fs::read_to_string(ws.join("env.txt")).expect("env.txt");
    assert!(env.contains("HARMLESS_VARIABLE=still-here"), "{env}");
    for leak in [
        "OPENAI_API_KEY",
        "OTHER_PROVIDER_KEY",
        "COPY_OF_THE_KEY",
        "TAGLOOP_DEPLOY_TOKEN",
        OPENAI_KEY,
        OTHER_KEY,
    ] {
        assert!(!env.contains(leak), "the shell's environment has {leak}");
    }
    let cmdline = std::fs::read(ws.join("cmdline.bin")).expect("cmdline");
    assert!(!cmdline.is_empty(), "/proc/PID/cmdline stays readable");
    let has =
        |bytes: &[u8], needle: &str| bytes.windows(needle.len()).any(|w| w == needle.as_bytes());
    assert!(!has(&cmdline, OPENAI_KEY) && !has(&cmdline, OTHER_KEY));

    match prefix {
        Some(_) => {
            // Not root: tagloop's environ and mem are closed to its children.
            let environ = std::fs::read(ws.join("environ.bin")).expect("environ.bin");
            let err = std::fs::read_to_string(ws.join("environ.err")).expect("environ.err");
            assert!(
                !has(&environ, OPENAI_KEY) && !has(&environ, OTHER_KEY),
                "/proc/$PPID/environ gave the key"
            );
            assert!(err.contains("Permission denied"), "{err}");
            let b64 = std::fs::read_to_string(ws.join("environ.b64")).expect("b64");
            assert!(b64.contains("Permission denied"), "{b64}");
            let mem = std::fs::read(ws.join("mem.bin")).expect("mem.bin");
            assert!(mem.is_empty(), "/proc/$PPID/mem was readable");
        }
        None => eprintln!(
            "note: running as root without setpriv: root can read /proc/<tagloop>/environ, so only the child environment is checked"
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Item 8: MCP tools and the gates.

#[test]
fn the_cli_gates_mcp_writes_and_keeps_keys_from_mcp_servers() {
    let dir = scratch();
    let ws = dir.path().join("ws");
    let note = dir.path().join("note.txt");
    let mcp = format!("'{}'", mcp_server_bin().display());
    let turns = [
        r#"<action>tagloop_test.env_var(name="OPENAI_API_KEY")</action>"#.to_string(),
        r#"<action>tagloop_test.env_var(name="OTHER_PROVIDER_KEY")</action>"#.to_string(),
        format!(
            r#"<action>tagloop_test.write_note(path="{}", text="from the model")</action>"#,
            note.display()
        ),
        "<final_answer>done</final_answer>".to_string(),
    ];
    let turns: Vec<&str> = turns.iter().map(String::as_str).collect();
    let model = script(dir.path(), &turns);
    std::fs::write(
        dir.path().join("tagloop.toml"),
        "[providers.other]\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"OTHER_PROVIDER_KEY\"\n",
    )
    .expect("config");
    let run = |extra: &[&str]| {
        let out = tagloop(dir.path())
            .env("OPENAI_API_KEY", OPENAI_KEY)
            .env("OTHER_PROVIDER_KEY", OTHER_KEY)
            .args([
                "run", "--model", &model, "--mcp", &mcp, "--quiet", "--events",
            ])
            .arg(dir.path().join("ev.jsonl"))
            .arg("--workspace")
            .arg(&ws)
            .args(extra)
            .arg("task")
            .output()
            .expect("tagloop runs");
        let events = std::fs::read_to_string(dir.path().join("ev.jsonl")).unwrap_or_default();
        (out, events)
    };

    // Without --allow-write the write tool is not offered: the call is refused, nothing written.
    let (_, events) = run(&[]);
    assert!(!note.exists(), "an MCP write ran without --allow-write");
    assert!(events.contains("OPENAI_API_KEY is not set"), "{events}");
    assert!(events.contains("OTHER_PROVIDER_KEY is not set"), "{events}");
    assert!(!events.contains(OTHER_KEY));

    // Under --confirm with no terminal to ask on, the write is declined.
    let (_, events) = run(&["--allow-write", "--confirm"]);
    assert!(!note.exists(), "a write ran under --confirm without a yes");
    assert!(events.contains("declined"), "{events}");

    // Allowed: it runs.
    let (out, _) = run(&["--allow-write"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&note).expect("note"),
        "from the model"
    );

    // A key the user passes on purpose reaches the server.
    let (_, events) = run(&["--mcp-env", "OTHER_PROVIDER_KEY"]);
    // (The value itself may be redacted from the observation; what matters is that it was set.)
    assert!(
        !events.contains("OTHER_PROVIDER_KEY is not set"),
        "--mcp-env did not pass the key: {events}"
    );
}

#[test]
fn orphans_that_exit_are_reaped_while_the_command_runs() {
    let dir = scratch();
    let ws = dir.path().join("ws");
    // The subshell exits at once, so its `setsid` child is re-parented to tagloop; it exits after
    // 0.2 s and must not stay a zombie of tagloop.
    let model = script(
        dir.path(),
        &[
            r#"<action>run_command(command="(setsid sh -c 'sleep 0.2' &); sleep 1.5; ps -o stat= --ppid $PPID | tr -d ' ' | sort | tr '\n' ','")</action>"#,
            "<final_answer>done</final_answer>",
        ],
    );
    let out = tagloop(dir.path())
        .args([
            "run",
            "--model",
            &model,
            "--allow-shell",
            "--quiet",
            "--events",
        ])
        .arg(dir.path().join("ev.jsonl"))
        .arg("--workspace")
        .arg(&ws)
        .arg("task")
        .output()
        .expect("tagloop runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = std::fs::read_to_string(dir.path().join("ev.jsonl")).expect("events");
    let observation = events
        .lines()
        .find(|l| l.contains("\"type\":\"observation\""))
        .expect("an observation");
    // The states of tagloop's children, e.g. `S,` (the shell itself, so `ps` did see them;
    // `SN,` when the tests run under `nice`; `R,` when a loaded machine had it runnable then).
    let states = observation
        .split("--- stdout ---\\n")
        .nth(1)
        .and_then(|rest| rest.split("\\n").next())
        .unwrap_or_else(|| panic!("no stdout in {observation}"));
    assert!(
        states
            .split(',')
            .any(|s| s.starts_with('S') || s.starts_with('R')),
        "{observation}"
    );
    assert!(
        !states.contains('Z'),
        "tagloop kept a zombie orphan: {states}"
    );
}
