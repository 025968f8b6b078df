//! An eval suite: JSON Lines of tasks, each with the check its result must pass.
//!
//! ```json
//! {"id": "count", "task": "How many files are in notes/?", "check": {"contains": "3"},
//!  "workspace": "fixture"}
//! ```
//!
//! `check` is one check or an array of checks that must all pass. The kinds:
//! `{"equals": V}` (the final answer is V; strings compare with surrounding white space trimmed),
//! `{"contains": "s"}` and `{"regex": "r"}` (on the final answer as text: a string as it is,
//! anything else as compact JSON; case-sensitive, write `(?i)` in a regex to ignore case),
//! `{"json_schema": S}` (the final answer, parsed as JSON when it is a string, validates against
//! S), `{"file": {"path": "p", "contains": "s"}}` (after the run the workspace has the file `p`,
//! holding `s` when given). Optional fields: `workspace` (a folder, relative to the suite file,
//! copied fresh for each run), `role` (a role file path or an inline role object, as in `batch`),
//! `output_schema` (a JSON Schema object for the final answer), `context` (as in `batch`).
//!
//! The whole suite is read and checked before anything runs; a bad line is a usage error naming it.
//! That includes the paths: a `workspace` or `role` file must lie inside the suite file's folder
//! once symlinks are resolved, and a workspace within the copy bounds (see `task_paths`).

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use serde_json::Value;

use tagloop::agent::Role;
use tagloop::prompt::ContextItem;
use tagloop::tools::{Access, Workspace};

use super::task_paths::TaskFolder;

/// One task of a suite, checked and ready to run.
pub struct EvalTask {
    /// The id, as text.
    pub id: String,
    /// The task given to the agent.
    pub task: String,
    /// What its result must pass.
    pub checks: Vec<Check>,
    /// The folder copied fresh for each run, if the task has one.
    pub workspace: Option<PathBuf>,
    /// The role, if the task brings one (with its output schema folded in).
    pub role: Option<Role>,
    /// Context for the role.
    pub context: Option<Vec<ContextItem>>,
}

/// One check of a task's result.
pub enum Check {
    /// The final answer equals this value.
    Equals(Value),
    /// The final answer, as text, contains this.
    Contains(String),
    /// The final answer, as text, matches this.
    Regex(regex::Regex),
    /// The final answer validates against this schema.
    JsonSchema(Box<jsonschema::Validator>),
    /// The workspace has this file (relative path), holding this text when given.
    File {
        /// The file, relative to the workspace.
        path: PathBuf,
        /// Text it must contain.
        contains: Option<String>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    id: Value,
    task: String,
    check: Value,
    #[serde(default)]
    workspace: Option<PathBuf>,
    #[serde(default)]
    role: Option<Value>,
    #[serde(default)]
    output_schema: Option<Value>,
    #[serde(default)]
    context: Option<Vec<ContextItem>>,
}

/// Read and check a whole suite. Errors name the file and line.
pub fn read_suite(path: &Path) -> Result<Vec<EvalTask>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let base = TaskFolder::of(path, "the suite's folder")?;
    let mut seen = HashSet::new();
    let mut tasks = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{} line {}", path.display(), i + 1);
        let task = read_line(line, &base).with_context(at)?;
        if !seen.insert(task.id.clone()) {
            bail!("{}: the id {} appears twice", at(), task.id);
        }
        tasks.push(task);
    }
    if tasks.is_empty() {
        bail!("{} has no tasks", path.display());
    }
    Ok(tasks)
}

/// The tasks a small experiment runs: those whose ids `only` names (all of them when it is
/// empty), then the first `limit` of those, always in the suite's order. An id of `only` that
/// the suite does not have is an error naming it (with a few of the suite's ids), so a typo
/// does not silently run nothing or something else.
pub fn select(
    tasks: Vec<EvalTask>,
    only: &[String],
    limit: Option<usize>,
) -> Result<Vec<EvalTask>> {
    /// Ids listed in an error, at most.
    const SHOWN: usize = 10;
    let wanted: HashSet<&str> = only
        .iter()
        .map(|id| id.trim())
        .filter(|id| !id.is_empty())
        .collect();
    let have: HashSet<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
    let mut unknown: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|id| !have.contains(id))
        .collect();
    if !unknown.is_empty() {
        unknown.sort_unstable();
        bail!(
            "--only: the suite has no task {} (its ids: {})",
            first_ids(unknown.into_iter(), SHOWN),
            first_ids(tasks.iter().map(|t| t.id.as_str()), SHOWN)
        );
    }
    Ok(tasks
        .into_iter()
        .filter(|t| wanted.is_empty() || wanted.contains(t.id.as_str()))
        .take(limit.unwrap_or(usize::MAX))
        .collect())
}

/// Up to `n` ids in backquotes, then `…` when there are more.
fn first_ids<'a>(mut ids: impl Iterator<Item = &'a str>, n: usize) -> String {
    let mut shown: Vec<String> = ids.by_ref().take(n).map(|id| format!("`{id}`")).collect();
    if ids.next().is_some() {
        shown.push("…".into());
    }
    shown.join(", ")
}

fn read_line(line: &str, base: &TaskFolder) -> Result<EvalTask> {
    let l: Line = serde_json::from_str(line).context(
        "not a suite task: expected {\"id\", \"task\", \"check\"} and optionally \"workspace\", \
         \"role\", \"output_schema\", \"context\"",
    )?;
    let id = match &l.id {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => bail!("the id must be a string or a number, not {other}"),
    };
    if l.task.trim().is_empty() {
        bail!("the task is empty");
    }
    let checks = match l.check {
        Value::Array(items) if items.is_empty() => bail!("`check` is an empty list"),
        Value::Array(items) => items.iter().map(parse_check).collect::<Result<_>>()?,
        one => vec![parse_check(&one)?],
    };
    let workspace = match l.workspace {
        Some(w) => Some(base.workspace(&w)?),
        None => None,
    };
    let role = match l.role {
        None => None,
        Some(Value::String(p)) => Some(Role::load(&base.role_file(Path::new(&p))?)?),
        Some(obj @ Value::Object(_)) => Some(Role::from_inline(&obj)?),
        Some(_) => bail!("role must be a file path or an object"),
    };
    let role = match (role, l.output_schema) {
        (r, None) => r,
        (r, Some(schema)) => Some(r.unwrap_or_default().with_output_schema(schema)?),
    };
    Ok(EvalTask {
        id,
        task: l.task,
        checks,
        workspace,
        role,
        context: l.context,
    })
}

/// One check from its JSON form: an object with exactly one known key.
fn parse_check(v: &Value) -> Result<Check> {
    let obj = match v.as_object() {
        Some(o) if o.len() == 1 => o,
        _ => bail!(
            "a check is an object with one key (equals, contains, regex, json_schema, file), not {v}"
        ),
    };
    let (kind, arg) = obj
        .iter()
        .next()
        .map(|(k, a)| (k.as_str(), a))
        .unwrap_or(("", v));
    let text = |a: &Value| -> Result<String> {
        a.as_str()
            .map(str::to_owned)
            .with_context(|| format!("`{kind}` takes a string"))
    };
    Ok(match kind {
        "equals" => Check::Equals(arg.clone()),
        "contains" => Check::Contains(text(arg)?),
        "regex" => {
            Check::Regex(regex::Regex::new(&text(arg)?).context("`regex` is not a valid regex")?)
        }
        "json_schema" => {
            Check::JsonSchema(Box::new(tagloop::schema::compile(arg).map_err(|e| {
                anyhow::anyhow!("`json_schema` is not a valid schema: {e}")
            })?))
        }
        "file" => {
            let path = arg
                .get("path")
                .and_then(Value::as_str)
                .context("`file` takes {\"path\": \"…\", \"contains\": \"…\"}")?;
            let path = PathBuf::from(path);
            if !path
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
            {
                bail!("`file` path must be relative to the workspace, without `..`");
            }
            let contains = match arg.get("contains") {
                None => None,
                Some(c) => Some(text(c)?),
            };
            Check::File { path, contains }
        }
        other => bail!(
            "unknown check kind `{other}` (known: equals, contains, regex, json_schema, file)"
        ),
    })
}

/// The final answer as text: a string as it is, anything else as compact JSON.
fn answer_text(answer: &Value) -> String {
    match answer {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The most of a checked file that is read (a check looks for a string, not a whole disk).
const CHECKED_FILE_MAX: u64 = 16 << 20;

/// Read a file the agent left in its workspace, as the agent's own tools would: resolved inside
/// the workspace (a link the agent planted cannot lead out of it), without blocking on a FIFO,
/// a regular file only, and at most [`CHECKED_FILE_MAX`] bytes of it.
fn read_checked_file(workspace: &Path, path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let shown = path.display();
    let ws = Workspace::new(workspace).map_err(|e| format!("file {shown}: {e}"))?;
    let user_path = path.to_string_lossy();
    let resolved = ws
        .resolve(&user_path, Access::Read)
        .map_err(|e| format!("file {shown}: {e}"))?;
    let (file, meta) = ws
        .open_read_meta(&resolved)
        .map_err(|e| format!("file {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("file {shown} is not a regular file"));
    }
    let mut text = Vec::new();
    file.take(CHECKED_FILE_MAX)
        .read_to_end(&mut text)
        .map_err(|e| format!("file {shown}: {e}"))?;
    Ok(text)
}

impl Check {
    /// `Ok(())` when the result passes, else why not.
    pub fn verify(&self, answer: Option<&Value>, workspace: &Path) -> Result<(), String> {
        if let Check::File { path, contains } = self {
            let text = read_checked_file(workspace, path)?;
            return match contains {
                Some(c) if !String::from_utf8_lossy(&text).contains(c.as_str()) => {
                    Err(format!("file {} does not contain {c:?}", path.display()))
                }
                _ => Ok(()),
            };
        }
        let Some(answer) = answer else {
            return Err("no final answer".into());
        };
        match self {
            Check::Equals(want) => {
                let same = match (answer, want) {
                    (Value::String(a), Value::String(w)) => a.trim() == w.trim(),
                    (a, w) => a == w,
                };
                if same {
                    Ok(())
                } else {
                    Err(format!("answer is not {want}"))
                }
            }
            Check::Contains(s) if answer_text(answer).contains(s.as_str()) => Ok(()),
            Check::Contains(s) => Err(format!("answer does not contain {s:?}")),
            Check::Regex(r) if r.is_match(&answer_text(answer)) => Ok(()),
            Check::Regex(r) => Err(format!("answer does not match /{}/", r.as_str())),
            Check::JsonSchema(v) => {
                let parsed;
                let value = match answer {
                    Value::String(s) => {
                        parsed = serde_json::from_str::<Value>(s.trim())
                            .map_err(|_| "answer is not JSON".to_string())?;
                        &parsed
                    }
                    other => other,
                };
                v.validate(value)
                    .map_err(|e| format!("answer does not fit the schema: {e}"))
            }
            Check::File { .. } => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: Value) -> Check {
        parse_check(&v).unwrap()
    }

    #[test]
    fn each_kind_passes_and_fails() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("out.txt"), "hello world").unwrap();
        let w = ws.path();
        let a = json!(" 42 ");
        assert!(check(json!({"equals": "42"})).verify(Some(&a), w).is_ok());
        assert!(check(json!({"equals": "41"})).verify(Some(&a), w).is_err());
        assert!(check(json!({"contains": "4"})).verify(Some(&a), w).is_ok());
        assert!(check(json!({"contains": "x"})).verify(Some(&a), w).is_err());
        assert!(
            check(json!({"regex": "^\\s*\\d+\\s*$"}))
                .verify(Some(&a), w)
                .is_ok()
        );
        assert!(
            check(json!({"regex": "^\\d+$"}))
                .verify(Some(&a), w)
                .is_err()
        );
        let schema = json!({"json_schema": {"type": "object", "required": ["n"]}});
        assert!(
            check(schema.clone())
                .verify(Some(&json!({"n": 1})), w)
                .is_ok()
        );
        assert!(
            check(schema.clone())
                .verify(Some(&json!("{\"n\": 1}")), w)
                .is_ok()
        );
        assert!(
            check(schema.clone())
                .verify(Some(&json!({"m": 1})), w)
                .is_err()
        );
        assert!(check(schema).verify(Some(&json!("not json")), w).is_err());
        let file = |c: Value| check(json!({"file": c}));
        assert!(file(json!({"path": "out.txt"})).verify(None, w).is_ok());
        assert!(
            file(json!({"path": "out.txt", "contains": "world"}))
                .verify(None, w)
                .is_ok()
        );
        assert!(
            file(json!({"path": "out.txt", "contains": "moon"}))
                .verify(None, w)
                .is_err()
        );
        assert!(
            file(json!({"path": "missing.txt"}))
                .verify(None, w)
                .is_err()
        );
        // Answer checks fail without an answer.
        assert_eq!(
            check(json!({"contains": "4"})).verify(None, w).unwrap_err(),
            "no final answer"
        );
    }

    #[test]
    fn bad_checks_are_refused_with_a_reason() {
        for (v, says) in [
            (json!({"smells": "x"}), "unknown check kind `smells`"),
            (json!({"equals": 1, "contains": "1"}), "one key"),
            (json!("contains"), "one key"),
            (json!({"contains": 3}), "takes a string"),
            (json!({"regex": "("}), "not a valid regex"),
            (json!({"file": {"path": "../x"}}), "without `..`"),
            (json!({"file": {"path": "/etc/passwd"}}), "without `..`"),
            (json!({"json_schema": {"type": 3}}), "not a valid schema"),
        ] {
            let err = parse_check(&v)
                .err()
                .map(|e| format!("{e:#}"))
                .unwrap_or_default();
            assert!(err.contains(says), "{v}: {err}");
        }
    }

    #[test]
    fn a_suite_is_read_whole_and_bad_lines_are_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("ws")).unwrap();
        let suite = dir.path().join("suite.jsonl");
        std::fs::write(
            &suite,
            "{\"id\": 1, \"task\": \"t\", \"check\": {\"contains\": \"a\"}, \"workspace\": \"ws\"}\n\n\
             {\"id\": \"s\", \"task\": \"t\", \"check\": [{\"equals\": 1}, {\"regex\": \"1\"}], \
             \"output_schema\": {\"type\": \"integer\"}}\n",
        )
        .unwrap();
        let tasks = read_suite(&suite).unwrap();
        assert_eq!(tasks.len(), 2);
        assert_eq!(tasks[0].id, "1");
        assert_eq!(
            tasks[0].workspace.as_deref(),
            Some(dir.path().join("ws").canonicalize().unwrap().as_path())
        );
        assert_eq!(tasks[1].checks.len(), 2);
        assert!(tasks[1].role.as_ref().unwrap().output_schema().is_some());
        for (text, says) in [
            ("not json", "line 1"),
            ("{\"id\": 1, \"task\": \"t\"}", "line 1"),
            (
                "{\"id\": 1, \"task\": \"t\", \"check\": {\"nope\": 1}}",
                "unknown check kind",
            ),
            (
                "{\"id\": 1, \"task\": \" \", \"check\": {\"equals\": 1}}",
                "the task is empty",
            ),
            (
                "{\"id\": 1, \"task\": \"t\", \"check\": {\"equals\": 1}, \"extra\": 2}",
                "unknown field",
            ),
            (
                "{\"id\": 1, \"task\": \"t\", \"check\": {\"equals\": 1}, \"workspace\": \"nope\"}",
                "cannot be found",
            ),
            (
                "{\"id\": 1, \"task\": \"t\", \"check\": {\"equals\": 1}}\n{\"id\": \"1\", \"task\": \"t\", \"check\": {\"equals\": 1}}",
                "line 2: the id 1 appears twice",
            ),
            ("", "has no tasks"),
        ] {
            std::fs::write(&suite, text).unwrap();
            let err = format!("{:#}", read_suite(&suite).err().unwrap());
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
