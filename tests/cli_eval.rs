//! `tagloop eval SUITE` through the binary with the scripted model: the report, the checks, fresh
//! workspaces, repeats, the pass-rate gate and bad suites.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

mod common;
use common::fake_server::{FakeConfig, FakeServer};

/// A suite folder: a fixture workspace, a script and a suite file.
fn lab(suite: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("fixture/notes")).unwrap();
    std::fs::write(d.join("fixture/notes/a.txt"), "alpha\n").unwrap();
    std::fs::write(
        d.join("script.txt"),
        "s\n=== turn ===\n<thought>write</thought><action>write_file(path=\"out.txt\", content=\"answer 42\")</action>\n\
         === turn ===\nno tags at all\n\
         === turn ===\n<final_answer>42</final_answer>\n",
    )
    .unwrap();
    std::fs::write(d.join("suite.jsonl"), suite).unwrap();
    let script = d.join("script.txt");
    (dir, script)
}

fn eval(dir: &Path, script: &Path, extra: &[&str]) -> std::process::Output {
    Command::cargo_bin("tagloop")
        .unwrap()
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("XDG_CONFIG_HOME", dir.join("noconf"))
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .args(["eval", "suite.jsonl", "--model"])
        .arg(format!("scripted:{}", script.display()))
        .args(["--session-dir", "sessions", "--allow-write"])
        .args(extra)
        .output()
        .unwrap()
}

const SUITE: &str = r#"{"id": "eq", "task": "What is 6*7?", "check": {"equals": "42"}, "workspace": "fixture"}
{"id": "file", "task": "Write out.txt", "check": [{"file": {"path": "out.txt", "contains": "42"}}, {"file": {"path": "notes/a.txt", "contains": "alpha"}}], "workspace": "fixture"}
{"id": "wrong", "task": "What is 6*8?", "check": {"contains": "48"}, "workspace": "fixture"}
{"id": "schema", "task": "A number", "check": {"json_schema": {"type": "integer", "minimum": 40}}, "output_schema": {"type": "integer"}, "workspace": "fixture"}
"#;

#[test]
fn the_json_report_counts_runs_checks_and_readable_turns() {
    let (dir, script) = lab(SUITE);
    let out = eval(dir.path(), &script, &["--json", "--repeat", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["tasks"], 8);
    assert_eq!(report["passed"], 6);
    assert_eq!(report["pass_rate"], 0.75);
    // Every run: 3 turns, one of them unreadable (the turn without tags).
    assert_eq!(report["turns"], 24);
    let rate = report["readable_turn_rate"].as_f64().unwrap();
    assert!((rate - 16.0 / 24.0).abs() < 1e-9, "{rate}");
    assert_eq!(report["steps"], 16);
    assert!(report["tokens"].as_u64().unwrap() > 0);
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 8);
    let wrong: Vec<&Value> = results.iter().filter(|r| r["id"] == "wrong").collect();
    assert_eq!(wrong.len(), 2);
    for r in wrong {
        assert_eq!(r["passed"], false);
        assert_eq!(r["status"], "ok");
        assert!(
            r["reason"]
                .as_str()
                .unwrap()
                .contains("does not contain \"48\"")
        );
        assert_eq!(
            (r["turns"].as_u64(), r["format_corrections"].as_u64()),
            (Some(3), Some(1))
        );
        // Its transcript was written.
        let session = r["session"].as_str().unwrap();
        assert!(
            dir.path()
                .join("sessions")
                .join(format!("{session}.jsonl"))
                .is_file()
        );
    }
    // Each run had its own copy: the fixture itself was never written.
    assert!(!dir.path().join("fixture/out.txt").exists());
    assert!(!dir.path().join("out.txt").exists());
}

#[test]
fn the_table_and_the_pass_rate_gate() {
    let (dir, script) = lab(SUITE);
    let out = eval(dir.path(), &script, &[]);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("4 runs · 3 passed (75%) · readable turns 67% (12 turns, 0% constrained)"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("wrong") && l.contains(" no ")),
        "{table}"
    );
    let out = eval(dir.path(), &script, &["--min-pass-rate", "0.8", "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let out = eval(dir.path(), &script, &["--min-pass-rate", "0.75", "--json"]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_bad_suite_is_exit_2_naming_the_line_and_runs_nothing() {
    for (suite, says) in [
        (
            "{\"id\": 1, \"task\": \"t\", \"check\": {\"equals\": 1}}\nnot json\n",
            "line 2",
        ),
        (
            "{\"id\": 1, \"task\": \"t\", \"check\": {\"sounds_like\": \"x\"}}\n",
            "unknown check kind `sounds_like`",
        ),
    ] {
        let (dir, script) = lab(suite);
        let out = eval(dir.path(), &script, &["--json"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains(says));
        assert!(out.stdout.is_empty());
        assert!(!dir.path().join("sessions").exists());
    }
}

/// The project's own suite (examples/eval) stays valid: every line reads, every workspace exists,
/// and a model that answers nothing useful passes none of it.
#[test]
fn the_projects_suite_reads_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.txt");
    std::fs::write(
        &script,
        "s\n=== turn ===\n<final_answer>no idea</final_answer>\n",
    )
    .unwrap();
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/eval/suite.jsonl");
    let out = Command::cargo_bin("tagloop")
        .unwrap()
        .current_dir(dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join("noconf"))
        .arg("eval")
        .arg(&suite)
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .args(["--no-sessions", "--json", "--allow-write"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["tasks"].as_u64().unwrap() >= 20);
    assert_eq!(report["passed"], 0);
    assert_eq!(report["readable_turn_rate"], 1.0);
}

fn ids(out: &std::process::Output) -> Vec<String> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

/// A small experiment runs a few tasks of a big suite: `--only` picks them by id, `--limit`
/// keeps the first N (of the suite, or of what `--only` picked), in the suite's order.
#[test]
fn only_and_limit_pick_the_tasks_to_run() {
    let (dir, script) = lab(SUITE);
    let d = dir.path();
    let run = |extra: &[&str]| ids(&eval(d, &script, &[&["--json"], extra].concat()));
    assert_eq!(run(&["--only", "wrong,eq"]), ["eq", "wrong"]);
    assert_eq!(
        run(&["--only", "schema", "--only", "file"]),
        ["file", "schema"]
    );
    assert_eq!(run(&["--limit", "2"]), ["eq", "file"]);
    assert_eq!(
        run(&["--only", "schema,wrong,file", "--limit", "2"]),
        ["file", "wrong"]
    );
    assert_eq!(run(&["--limit", "99"]).len(), 4);
    // `--repeat` still repeats what was picked.
    assert_eq!(run(&["--only", "eq", "--repeat", "2"]), ["eq", "eq"]);
}

#[test]
fn an_unknown_id_in_only_is_exit_2_naming_it_and_runs_nothing() {
    let (dir, script) = lab(SUITE);
    let out = eval(dir.path(), &script, &["--json", "--only", "eq,nope,file"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    // It names the unknown id, and only that one, as missing (then the suite's ids, to help).
    let missing = err.split("(its ids").next().unwrap_or_default();
    assert!(missing.contains("`nope`"), "{err}");
    assert!(
        !missing.contains("`eq`") && !missing.contains("`file`"),
        "{err}"
    );
    assert!(
        err.contains("its ids: `eq`, `file`, `wrong`, `schema`"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    assert!(!dir.path().join("sessions").exists());
    let out = eval(dir.path(), &script, &["--json", "--limit", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `tagloop eval … | head -1`: the reader leaves, eval ends quietly (no panic, exit 0).
#[test]
fn eval_is_quiet_when_its_reader_is_gone() {
    for extra in [&[][..], &["--json"][..], &["--compare-grammar"][..]] {
        let (dir, script) = lab(SUITE);
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tagloop"))
            .current_dir(dir.path())
            .env("NO_COLOR", "1")
            .env("XDG_CONFIG_HOME", dir.path().join("noconf"))
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
            .args(["eval", "suite.jsonl", "--model"])
            .arg(format!("scripted:{}", script.display()))
            .args(["--no-sessions", "--allow-write", "--only", "eq"])
            .args(extra)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {err}");
        for bad in ["panicked", "Broken pipe", "error"] {
            assert!(!err.contains(bad), "{extra:?}: stderr says {bad:?}: {err}");
        }
    }
}

/// `eval --base-url URL` without `--model`: the server's one model is asked for once, not once
/// per task (tasks with a workspace each build their own setup).
#[test]
fn a_model_picked_from_the_server_is_asked_for_once() {
    let (dir, _script) = lab(SUITE);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut cfg = FakeConfig::turns(["<final_answer>42</final_answer>"]);
    cfg.default_reply = "<final_answer>42</final_answer>".into();
    let server = rt.block_on(FakeServer::start(cfg));
    let out = Command::cargo_bin("tagloop")
        .unwrap()
        .current_dir(dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join("noconf"))
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("TAGLOOP_MODEL")
        .args(["eval", "suite.jsonl", "--base-url", &server.base_url])
        // No detection probe and no window probe (each task's client would make its own, and
        // they ask /v1/models too): only the model list is counted here. The window is large
        // enough that no prompt comes near it: near it, the run counts its prompt's tokens with
        // the server, whose kind it first asks /v1/models for.
        .args([
            "--grammar",
            "off",
            "--context-window",
            "32768",
            "--no-sessions",
            "--json",
            "--allow-write",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(server.model_lists().len(), 1, "{err}");
    assert_eq!(err.matches("model: fake-model").count(), 1, "{err}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["tasks"], 4);
}

/// Issue 31: the server's kind and context window are learned once per eval (one `/props`), not
/// once per task, though every task with a workspace builds its own tools.
#[test]
fn the_server_is_probed_once_per_eval_not_once_per_task() {
    let (dir, _script) = lab(SUITE);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cfg = FakeConfig {
        props: true,
        props_n_ctx: 8192,
        default_reply: "<final_answer>42</final_answer>".into(),
        ..FakeConfig::turns(["<final_answer>42</final_answer>"])
    };
    let server = rt.block_on(FakeServer::start(cfg));
    let out = Command::cargo_bin("tagloop")
        .unwrap()
        .current_dir(dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join("noconf"))
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .args(["eval", "suite.jsonl", "--base-url", &server.base_url])
        .args([
            "--model",
            "fake-model",
            "--no-sessions",
            "--json",
            "--allow-write",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["tasks"], 4);
    assert_eq!(server.probes(), 1, "one /props for the four tasks: {err}");
}

/// A task without a `workspace` runs in a fresh empty folder, not where eval was started: the
/// scripted model writes `out.txt` (writes are on), the file check finds it in the task's own
/// folder, and the folder eval ran from has no `out.txt` afterwards.
#[test]
fn a_task_without_a_workspace_writes_into_its_own_empty_folder() {
    let (dir, script) = lab(
        r#"{"id": "nows", "task": "Write out.txt", "check": {"file": {"path": "out.txt", "contains": "42"}}}
"#,
    );
    let out = eval(dir.path(), &script, &["--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["passed"], 1, "{report}");
    assert!(!dir.path().join("out.txt").exists());
}

/// The text of every transcript in `sessions`.
fn transcripts(sessions: &Path) -> Vec<String> {
    std::fs::read_dir(sessions)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect()
}

/// The system prompts of every transcript in `sessions`, sorted.
fn system_prompts(sessions: &Path) -> Vec<String> {
    let mut prompts: Vec<String> = transcripts(sessions)
        .into_iter()
        .map(|t| {
            let line = t.lines().nth(1).unwrap().to_string();
            let v: Value = serde_json::from_str(&line).unwrap();
            v["message"]["content"].as_str().unwrap().to_string()
        })
        .collect();
    prompts.sort();
    prompts
}

#[test]
fn with_scratch_every_run_names_the_same_workspace_and_leaves_nothing_behind() {
    let (dir, script) = lab(SUITE);
    let scratch = dir.path().join("scratch");
    let s = scratch.to_str().unwrap();
    let mut seen = vec![];
    for kept in ["s1", "s2"] {
        let out = eval(dir.path(), &script, &["--json", "--scratch", s]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["passed"], 3, "{report}");
        std::fs::rename(dir.path().join("sessions"), dir.path().join(kept)).unwrap();
        seen.push(system_prompts(&dir.path().join(kept)));
    }
    // The same prompts twice, each naming a neutral folder under the scratch folder (an id
    // such as `eq` would tell the model about its task).
    assert_eq!(seen[0], seen[1]);
    let named = format!("{}/task-", scratch.display());
    assert!(seen[0].iter().all(|p| p.contains(&named)), "{:?}", seen[0]);
    assert!(seen[0].iter().all(|p| !p.contains("/eq ")), "{:?}", seen[0]);
    // Every task's folder is gone; one left behind (a killed eval) stops the next eval before
    // anything runs, naming it.
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
    let eq = transcripts(&dir.path().join("s1"))
        .into_iter()
        .find(|t| t.contains("What is 6*7?"))
        .unwrap();
    let folder = eq.split(&named).nth(1).unwrap().split(' ').next().unwrap();
    std::fs::create_dir(scratch.join(format!("task-{folder}"))).unwrap();
    let out = eval(dir.path(), &script, &["--json", "--scratch", s]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("task-{folder}")) && err.contains("--scratch"),
        "{err}"
    );
    assert!(!dir.path().join("sessions").exists(), "nothing ran");
}
