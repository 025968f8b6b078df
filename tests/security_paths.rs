//! Paths named by a task file (issue 21, item 7): an eval suite's `workspace` and `role`, and a
//! batch input's `role`, resolve inside the task file's folder (after symlinks are resolved);
//! anything else is exit 2 naming the line. A workspace copy never follows a link out and
//! refuses a file over its size bound; a role file's parse error names the place, never the text.
//! Each test reproduces the attack through the binary.

use std::path::PathBuf;

use assert_cmd::Command;

/// What the files outside the suite's folder hold: it must never reach a run or a message.
const SECRET: &str = "s3cret-outside-the-suite-7731";

/// A folder holding `suite/` (the task files, a fixture workspace and a model script) and
/// `outside/` (a folder and a role file the task files must not reach).
struct Lab {
    dir: tempfile::TempDir,
}

impl Lab {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("suite/fixture")).unwrap();
        std::fs::write(d.join("suite/fixture/a.txt"), "alpha\n").unwrap();
        std::fs::write(
            d.join("suite/script.txt"),
            "s\n=== turn ===\n<final_answer>42</final_answer>\n",
        )
        .unwrap();
        std::fs::create_dir_all(d.join("outside")).unwrap();
        std::fs::write(d.join("outside/secret.txt"), SECRET).unwrap();
        std::fs::write(
            d.join("outside/role.toml"),
            format!("name = \"thief\"\ninstructions = \"{SECRET}\"\n"),
        )
        .unwrap();
        Lab { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// `tagloop eval suite/suite.jsonl` with `suite` as the suite, from the lab's folder.
    fn eval(&self, suite: &str) -> std::process::Output {
        std::fs::write(self.path("suite/suite.jsonl"), suite).unwrap();
        self.cmd()
            .args(["eval", "suite/suite.jsonl", "--json", "--model"])
            .arg(format!(
                "scripted:{}",
                self.path("suite/script.txt").display()
            ))
            .output()
            .unwrap()
    }

    /// `tagloop batch suite/tasks.jsonl` with `input` as the tasks.
    fn batch(&self, input: &str) -> std::process::Output {
        std::fs::write(self.path("suite/tasks.jsonl"), input).unwrap();
        self.cmd()
            .args([
                "batch",
                "suite/tasks.jsonl",
                "--out",
                "out.jsonl",
                "--model",
            ])
            .arg(format!(
                "scripted:{}",
                self.path("suite/script.txt").display()
            ))
            .output()
            .unwrap()
    }

    fn cmd(&self) -> Command {
        let mut c = Command::cargo_bin("tagloop").unwrap();
        c.current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            .env("XDG_CONFIG_HOME", self.path("noconf"))
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("TAGLOOP_MODEL")
            .env("TAGLOOP_SESSION_DIR", self.path("sessions"));
        c
    }
}

/// The output is exit 2, its error names `says`, and nothing of the outside files is in it.
fn refused(out: &std::process::Output, says: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "stdout: {}\nstderr: {stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    for s in says {
        assert!(stderr.contains(s), "the error does not say {s:?}: {stderr}");
    }
    for text in [
        stderr.as_ref(),
        String::from_utf8_lossy(&out.stdout).as_ref(),
    ] {
        assert!(!text.contains(SECRET), "the secret leaked: {text}");
    }
}

fn task_line(id: u32, extra: &str) -> String {
    format!(r#"{{"id": {id}, "task": "t", "check": {{"equals": "42"}}{extra}}}"#)
}

/// A good first line, then the line under test: the error must name line 2.
fn suite_with(extra: &str) -> String {
    format!("{}\n{}\n", task_line(1, ""), task_line(2, extra))
}

#[test]
fn an_eval_workspace_outside_the_suite_folder_is_refused_naming_the_line() {
    let lab = Lab::new();
    let outside = lab.path("outside");
    std::os::unix::fs::symlink(&outside, lab.path("suite/linked")).unwrap();
    for workspace in [
        "../outside".to_string(),
        outside.display().to_string(),
        "linked".to_string(),
        "fixture/../../outside".to_string(),
    ] {
        let out = lab.eval(&suite_with(&format!(r#", "workspace": "{workspace}""#)));
        refused(&out, &["suite.jsonl line 2", "outside the suite's folder"]);
    }
}

#[test]
fn the_root_folder_is_never_a_workspace() {
    let lab = Lab::new();
    let out = lab.eval(&suite_with(r#", "workspace": "/""#));
    refused(&out, &["line 2", "outside the suite's folder"]);
}

#[test]
fn an_eval_role_file_outside_the_suite_folder_is_refused_naming_the_line() {
    let lab = Lab::new();
    let role = lab.path("outside/role.toml");
    std::os::unix::fs::symlink(&role, lab.path("suite/linked.toml")).unwrap();
    for path in [
        "../outside/role.toml".to_string(),
        role.display().to_string(),
        "linked.toml".to_string(),
    ] {
        let out = lab.eval(&suite_with(&format!(r#", "role": "{path}""#)));
        refused(&out, &["suite.jsonl line 2", "outside the suite's folder"]);
    }
}

#[test]
fn a_batch_role_file_outside_the_input_folder_is_refused_naming_the_line() {
    let lab = Lab::new();
    let role = lab.path("outside/role.toml");
    for path in [
        "../outside/role.toml".to_string(),
        role.display().to_string(),
    ] {
        let input = format!(
            "{{\"id\": 1, \"task\": \"t\"}}\n{{\"id\": 2, \"task\": \"t\", \"role\": \"{path}\"}}\n"
        );
        let out = lab.batch(&input);
        refused(
            &out,
            &["tasks.jsonl line 2", "outside the task file's folder"],
        );
        assert!(!lab.path("out.jsonl").exists(), "a task ran");
    }
}

#[test]
fn a_role_file_parse_error_names_the_place_but_never_echoes_the_text() {
    let lab = Lab::new();
    // Not TOML: a line of an `.env` file, the kind of file a mistyped path reaches.
    std::fs::write(
        lab.path("suite/bad.toml"),
        format!("name = \"r\"\nOPENAI_API_KEY={SECRET}\n"),
    )
    .unwrap();
    // Valid TOML, but the secret is a string where a table is expected.
    std::fs::write(
        lab.path("suite/typed.toml"),
        format!("name = \"r\"\noutput_schema = 1\ninstructions = [\"{SECRET}\"]\n"),
    )
    .unwrap();
    // JSON that is a bare string: serde's message would quote it.
    std::fs::write(lab.path("suite/bare.json"), format!("\"{SECRET}\"")).unwrap();
    for (file, place) in [
        ("bad.toml", "line 2"),
        ("typed.toml", "line 3"),
        ("bare.json", "line 1"),
    ] {
        let out = lab.eval(&suite_with(&format!(r#", "role": "{file}""#)));
        refused(&out, &["suite.jsonl line 2", file, place]);
        let input = format!("{{\"id\": 1, \"task\": \"t\", \"role\": \"{file}\"}}\n");
        refused(&lab.batch(&input), &["tasks.jsonl line 1", file, place]);
    }
}

#[test]
fn a_workspace_file_over_the_size_bound_is_refused_before_anything_runs() {
    let lab = Lab::new();
    // Sparse: 65 MiB that use no disk, one MiB over the bound (copied dense, a 3 GB one would
    // fill the disk).
    let big = std::fs::File::create(lab.path("suite/fixture/big.bin")).unwrap();
    big.set_len((64 << 20) + (1 << 20)).unwrap();
    let out = lab.eval(&suite_with(r#", "workspace": "fixture""#));
    refused(&out, &["suite.jsonl line 2", "big.bin", "64 MiB"]);
}

#[test]
fn a_link_inside_a_workspace_is_never_followed_out_of_it() {
    let lab = Lab::new();
    let fixture = lab.path("suite/fixture");
    std::os::unix::fs::symlink(lab.path("outside/secret.txt"), fixture.join("leak.txt")).unwrap();
    std::os::unix::fs::symlink(lab.path("outside"), fixture.join("leakdir")).unwrap();
    let checks = r#"[{"file": {"path": "a.txt"}}, {"file": {"path": "leak.txt"}}]"#;
    let suite = format!(
        r#"{{"id": 1, "task": "t", "check": {checks}, "workspace": "fixture"}}
{{"id": 2, "task": "t", "check": {{"file": {{"path": "leakdir/secret.txt"}}}}, "workspace": "fixture"}}
"#
    );
    let out = lab.eval(&suite);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["passed"], 0,
        "a link was copied as its target: {report}"
    );
    let reasons: Vec<&str> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["reason"].as_str().unwrap_or(""))
        .collect();
    assert!(reasons[0].contains("leak.txt"), "{reasons:?}");
    assert!(reasons[1].contains("leakdir"), "{reasons:?}");
    assert!(!stdout.contains(SECRET));
}

/// A `file` check reads what the agent left in its workspace the way the agent's own tools
/// would: a link the agent planted there (here with the shell) cannot make the check read, and
/// so confirm, a file outside the workspace.
#[test]
fn a_file_check_never_follows_a_link_the_agent_planted_out_of_its_workspace() {
    let lab = Lab::new();
    let secret = lab.path("outside/secret.txt");
    std::fs::write(
        lab.path("suite/script.txt"),
        format!(
            "s\n=== turn ===\n<action>run_command(command=\"ln -s {} leak.txt\")</action>\n=== turn ===\n<final_answer>done</final_answer>\n",
            secret.display()
        ),
    )
    .unwrap();
    let suite = format!(
        r#"{{"id": 1, "task": "t", "workspace": "fixture", "check": {{"file": {{"path": "leak.txt", "contains": "{SECRET}"}}}}}}"#
    );
    std::fs::write(lab.path("suite/suite.jsonl"), format!("{suite}\n")).unwrap();
    let out = lab
        .cmd()
        .args([
            "eval",
            "suite/suite.jsonl",
            "--json",
            "--allow-shell",
            "--model",
        ])
        .arg(format!(
            "scripted:{}",
            lab.path("suite/script.txt").display()
        ))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .next_back()
        .unwrap_or_else(|| panic!("no JSON report: {stdout}"));
    let text = report.to_string();
    assert!(
        text.contains("\"passed\":0") || text.contains("\"passed\": 0"),
        "the check passed through a link out of the workspace: {text}"
    );
    assert!(
        text.contains("outside the workspace"),
        "the check does not say why it failed: {text}"
    );
    assert!(!text.contains(SECRET), "the secret leaked: {text}");
}
