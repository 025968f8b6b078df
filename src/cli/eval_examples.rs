//! The project's own eval suites (`examples/eval/dev.jsonl`, `examples/eval/validation.jsonl`),
//! checked without a model: every task is solvable and every check is fair.
//!
//! `examples/eval/answers/SUITE.jsonl` holds, for each task, a right answer and an obvious wrong
//! one written by hand (`right`, `wrong`: the final answer; `files`, `wrong_files`: what a run
//! leaves in the workspace, for tasks that write; `absent`: files the task names that must not
//! exist, for tasks whose right answer is that a file is missing). The checks that `tagloop eval`
//! runs must accept every right answer and refuse every wrong one; a check too loose to refuse
//! the wrong answer, or too strict to accept the right one, fails here rather than in a
//! measurement. Every file a task names must be in its workspace (or be one the task creates,
//! or one it is about missing), so no task asks about a file a fixture lost.
//!
//! The two suites are the dev and validation splits of docs/development.md: they must not share
//! a workspace or an id, and `suite.jsonl` (the 27 tasks measured before the split) stays the
//! first lines of the dev suite, so older figures in BENCHMARKS.md remain reproducible.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::eval_suite::{EvalTask, read_suite};

/// The fewest tasks each split must have (issue 43).
const MIN_TASKS: usize = 40;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    id: String,
    right: Value,
    wrong: Value,
    #[serde(default)]
    files: HashMap<String, String>,
    #[serde(default)]
    wrong_files: HashMap<String, String>,
    #[serde(default)]
    absent: Vec<String>,
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/eval")
}

fn answers(split: &str) -> HashMap<String, Answer> {
    let path = examples().join("answers").join(format!("{split}.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap();
    let mut out = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let a: Answer = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let id = a.id.clone();
        assert!(
            out.insert(id.clone(), a).is_none(),
            "{split}: answer {id} twice"
        );
    }
    out
}

/// Which of `task`'s checks fail for this answer and these files (written into a fresh folder,
/// as a run would have left them in its copy of the workspace).
fn failures(task: &EvalTask, answer: &Value, files: &HashMap<String, String>) -> Vec<String> {
    let ws = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = ws.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    task.checks
        .iter()
        .filter_map(|c| c.verify(Some(answer), ws.path()).err())
        .collect()
}

/// Every path to a file the task's text names (`docs/intro.md`, `staff.csv`).
fn named_files(task: &str) -> Vec<String> {
    let re =
        regex::Regex::new(r"[\w./-]+\.(?:txt|md|csv|jsonl|json|yaml|yml|toml|log|py)\b").unwrap();
    re.find_iter(task).map(|m| m.as_str().to_owned()).collect()
}

/// Every file under `dir`, relative to it, with `/` between parts.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap();
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out
}

/// The suite's tasks, checked against their answers and their workspaces.
fn check_split(split: &str) -> Vec<EvalTask> {
    let tasks = read_suite(&examples().join(format!("{split}.jsonl"))).unwrap();
    assert!(tasks.len() >= MIN_TASKS, "{split}: {} tasks", tasks.len());
    let mut answers = answers(split);
    for task in &tasks {
        let id = &task.id;
        let a = answers
            .remove(id)
            .unwrap_or_else(|| panic!("{split}: no answer written for {id}"));
        let wrong = failures(task, &a.right, &a.files);
        assert!(
            wrong.is_empty(),
            "{split} {id}: the right answer fails: {wrong:?}"
        );
        assert!(
            !failures(task, &a.wrong, &a.wrong_files).is_empty(),
            "{split} {id}: the wrong answer passes every check"
        );
        let here = task
            .workspace
            .as_deref()
            .map(files_under)
            .unwrap_or_default();
        for name in named_files(&task.task) {
            let found = here
                .iter()
                .any(|f| *f == name || f.ends_with(&format!("/{name}")));
            if a.absent.contains(&name) {
                assert!(!found, "{split} {id}: {name} should be missing but exists");
            } else if !a.files.contains_key(&name) {
                assert!(found, "{split} {id}: names {name}, not in its workspace");
            }
        }
        for name in &a.absent {
            assert!(
                task.task.contains(name.as_str()),
                "{split} {id}: absent {name} is not named by the task"
            );
        }
    }
    let left: Vec<&String> = answers.keys().collect();
    assert!(left.is_empty(), "{split}: answers for no task: {left:?}");
    tasks
}

#[test]
fn every_dev_task_is_solvable_and_its_checks_refuse_a_wrong_answer() {
    check_split("dev");
}

#[test]
fn every_validation_task_is_solvable_and_its_checks_refuse_a_wrong_answer() {
    check_split("validation");
}

#[test]
fn the_splits_share_no_workspace_and_no_id() {
    let dev = read_suite(&examples().join("dev.jsonl")).unwrap();
    let val = read_suite(&examples().join("validation.jsonl")).unwrap();
    let ids: HashSet<&str> = dev.iter().map(|t| t.id.as_str()).collect();
    let shared: Vec<&str> = val
        .iter()
        .map(|t| t.id.as_str())
        .filter(|id| ids.contains(id))
        .collect();
    assert!(shared.is_empty(), "ids in both splits: {shared:?}");
    let dev_ws: HashSet<&Path> = dev.iter().filter_map(|t| t.workspace.as_deref()).collect();
    for t in &val {
        if let Some(ws) = t.workspace.as_deref() {
            assert!(
                !dev_ws
                    .iter()
                    .any(|d| ws.starts_with(d) || d.starts_with(ws)),
                "validation {} works in a dev workspace, {}",
                t.id,
                ws.display()
            );
        }
    }
}

#[test]
fn the_old_suite_is_the_start_of_the_dev_split() {
    let old = std::fs::read_to_string(examples().join("suite.jsonl")).unwrap();
    let dev = std::fs::read_to_string(examples().join("dev.jsonl")).unwrap();
    let old: Vec<&str> = old.lines().filter(|l| !l.trim().is_empty()).collect();
    let dev: Vec<&str> = dev.lines().take(old.len()).collect();
    assert_eq!(
        old, dev,
        "suite.jsonl must stay the first lines of dev.jsonl"
    );
}
