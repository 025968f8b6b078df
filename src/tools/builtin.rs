//! The built-in workspace toolkit (SPEC §3): reading, listing and searching always; writing only
//! with `allow_write`; `run_command` only with `allow_shell`. Every path goes through
//! [`Workspace::resolve`], so nothing outside the workspace can be read or written.
//!
//! Decisions worth knowing (the model sees them in the tool descriptions):
//!
//! - `read_file` returns the file's text exactly as it is, without line numbers (so that
//!   `edit_file` snippets can be copied from it). An empty file reads as `(empty file)`. Output
//!   beyond [`Limits::read_max_bytes`] is cut at a line boundary with a note saying where to go on.
//!   Lines are read with a bounded buffer: a line longer than the cap shows its beginning and the
//!   note says the rest of that line cannot be shown, so memory never depends on the file.
//! - Memory is bounded for every tool: `append_file` appends in place without reading,
//!   `edit_file` refuses files above [`Limits::edit_max_bytes`], `search_files` skips (and names)
//!   files with a line above [`Limits::search_max_line_bytes`].
//! - tagloop's configuration and secret files are refused by [`Workspace::resolve`] and skipped by
//!   `search_files`; a path ending in `/` is refused by the tools that act on a file.
//! - `list_dir` and `search_files` respect `.gitignore`, `.ignore` and `.git/info/exclude` (also
//!   outside git repositories), show hidden files, never enter `.git`, and never follow symbolic
//!   links. Paths they print are relative to the workspace root, so they can be passed back as is.
//! - `delete_path` deletes files, symbolic links (the link, not its target) and folders with their
//!   contents; never the workspace root.
//! - `move_path` refuses to overwrite an existing target.
//! - `run_command`'s timeout is reported as a failure that includes the output so far.

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, SearcherBuilder, sinks::Lossy};
use serde_json::{Map, Value, json};

use super::children::ChildEnv;
use super::confirm::Confirm;
use super::shell::run_shell;
use super::workspace::{Access, Workspace, is_protected_name};
use super::{Registry, Tool, ToolError};

/// Size and count limits of the toolkit.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Most bytes `read_file` returns in one call.
    pub read_max_bytes: usize,
    /// Most entries `list_dir` prints.
    pub list_max_entries: usize,
    /// Most matching lines `search_files` prints.
    pub search_max_matches: usize,
    /// Longest matching line shown in full (longer ones are cut with `…`), in characters.
    pub search_max_line_chars: usize,
    /// Longest line `search_files` looks into, in bytes: the searcher holds a whole line in
    /// memory, so a file with a longer line is skipped (and named as skipped).
    pub search_max_line_bytes: usize,
    /// Largest file `edit_file` changes, in bytes (it holds the old and the new text in memory).
    pub edit_max_bytes: u64,
    /// Bytes of stdout and of stderr kept from a command (half from the start, half from the end).
    pub command_output_max_bytes: usize,
    /// `run_command`'s timeout when the model gives none.
    pub command_timeout: Duration,
    /// The largest `timeout_s` a model may ask for.
    pub command_max_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            read_max_bytes: 256 * 1024,
            list_max_entries: 1000,
            search_max_matches: 200,
            search_max_line_chars: 300,
            search_max_line_bytes: 1024 * 1024,
            edit_max_bytes: 16 * 1024 * 1024,
            command_output_max_bytes: 64 * 1024,
            command_timeout: Duration::from_secs(60),
            command_max_timeout: Duration::from_secs(600),
        }
    }
}

/// What the toolkit offers.
#[derive(Clone, Default)]
pub struct ToolkitOptions {
    /// Offer `write_file`, `append_file`, `edit_file`, `make_dir`, `move_path`, `delete_path`.
    pub allow_write: bool,
    /// Offer `run_command`.
    pub allow_shell: bool,
    /// Ask this before every write and every command (confirm mode).
    pub confirm: Option<Arc<dyn Confirm>>,
    /// Size limits.
    pub limits: Limits,
    /// The environment `run_command` gets: no key tagloop knows of.
    pub child_env: ChildEnv,
}

impl std::fmt::Debug for ToolkitOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolkitOptions")
            .field("allow_write", &self.allow_write)
            .field("allow_shell", &self.allow_shell)
            .field("confirm", &self.confirm.is_some())
            .field("limits", &self.limits)
            .field("child_env", &self.child_env)
            .finish()
    }
}

/// The built-in tools for `ws`, gated by `opts`: tools that are not allowed are simply absent, so
/// the model never sees them.
pub fn toolkit(ws: Arc<Workspace>, opts: ToolkitOptions) -> Registry {
    let ctx = Arc::new(Ctx {
        ws,
        limits: opts.limits,
        confirm: opts.confirm,
        child_env: opts.child_env,
    });
    let mut kinds = vec![Kind::ReadFile, Kind::ListDir, Kind::SearchFiles];
    if opts.allow_write {
        kinds.extend([
            Kind::WriteFile,
            Kind::AppendFile,
            Kind::EditFile,
            Kind::MakeDir,
            Kind::MovePath,
            Kind::DeletePath,
        ]);
    }
    if opts.allow_shell {
        kinds.push(Kind::RunCommand);
    }
    let mut reg = Registry::new();
    for kind in kinds {
        reg.add(Arc::new(Builtin {
            kind,
            parameters: kind.parameters(),
            ctx: Arc::clone(&ctx),
        }));
    }
    reg
}

struct Ctx {
    ws: Arc<Workspace>,
    limits: Limits,
    confirm: Option<Arc<dyn Confirm>>,
    child_env: ChildEnv,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    ReadFile,
    ListDir,
    SearchFiles,
    WriteFile,
    AppendFile,
    EditFile,
    MakeDir,
    MovePath,
    DeletePath,
    RunCommand,
}

fn string_prop(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::ReadFile => "read_file",
            Kind::ListDir => "list_dir",
            Kind::SearchFiles => "search_files",
            Kind::WriteFile => "write_file",
            Kind::AppendFile => "append_file",
            Kind::EditFile => "edit_file",
            Kind::MakeDir => "make_dir",
            Kind::MovePath => "move_path",
            Kind::DeletePath => "delete_path",
            Kind::RunCommand => "run_command",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Kind::ReadFile => {
                "Read a text file from the workspace and return its content exactly (no line numbers). \
                 Give start_line and/or end_line (1-based, inclusive) to read part of a long file. \
                 Very long output is cut, with a note saying which start_line to use next."
            }
            Kind::ListDir => {
                "List a folder of the workspace (default: the workspace root). Folders end with `/`. \
                 Set recursive=true to list everything below it. Files ignored by .gitignore are left out. \
                 Paths are relative to the workspace root."
            }
            Kind::SearchFiles => {
                "Search file contents with a regular expression (Rust regex syntax; prefix with (?i) to ignore case). \
                 Prints one line per match as `path:line: text`. Searches the whole workspace, or only the \
                 folder or file given as path. Files ignored by .gitignore and binary files are skipped."
            }
            Kind::WriteFile => {
                "Create or replace a file with the given content. Missing parent folders are created."
            }
            Kind::AppendFile => {
                "Append content to the end of a file (add your own newline where needed). \
                 The file and its parent folders are created when missing."
            }
            Kind::EditFile => {
                "Replace one exact snippet of a file: `old` must appear exactly once in the file (copy it from \
                 read_file, including indentation); it is replaced by `new`. If `old` matches zero or several \
                 times nothing is changed: include more surrounding lines to make it unique."
            }
            Kind::MakeDir => "Create a folder (and any missing parent folders).",
            Kind::MovePath => {
                "Move or rename a file or folder inside the workspace. The target must not exist yet."
            }
            Kind::DeletePath => {
                "Delete a file, or a folder with everything in it. The workspace root cannot be deleted."
            }
            Kind::RunCommand => {
                "Run a shell command (sh -c) in the workspace root and return its exit code, stdout and stderr. \
                 stdin is empty, so the command must not wait for input. The command and everything it started \
                 are killed after timeout_s seconds (default 60). Long output is cut in the middle."
            }
        }
    }

    fn parameters(self) -> Value {
        let (props, required): (Vec<(&str, Value)>, Vec<&str>) = match self {
            Kind::ReadFile => (
                vec![
                    (
                        "path",
                        string_prop("File path, relative to the workspace root."),
                    ),
                    (
                        "start_line",
                        json!({"type": "integer", "minimum": 1, "description": "First line to read (1-based). Default: 1."}),
                    ),
                    (
                        "end_line",
                        json!({"type": "integer", "minimum": 1, "description": "Last line to read (inclusive). Default: the end of the file."}),
                    ),
                ],
                vec!["path"],
            ),
            Kind::ListDir => (
                vec![
                    (
                        "path",
                        json!({"type": "string", "description": "Folder to list, relative to the workspace root.", "default": "."}),
                    ),
                    (
                        "recursive",
                        json!({"type": "boolean", "description": "Also list everything in sub-folders.", "default": false}),
                    ),
                ],
                vec![],
            ),
            Kind::SearchFiles => (
                vec![
                    (
                        "pattern",
                        string_prop("Regular expression to look for in each line."),
                    ),
                    (
                        "path",
                        json!({"type": "string", "description": "Folder or file to search in. Default: the whole workspace.", "default": "."}),
                    ),
                ],
                vec!["pattern"],
            ),
            Kind::WriteFile | Kind::AppendFile => (
                vec![
                    (
                        "path",
                        string_prop("File path, relative to the workspace root."),
                    ),
                    ("content", string_prop("The text to write.")),
                ],
                vec!["path", "content"],
            ),
            Kind::EditFile => (
                vec![
                    (
                        "path",
                        string_prop("File path, relative to the workspace root."),
                    ),
                    (
                        "old",
                        string_prop("The exact text to replace; it must occur exactly once."),
                    ),
                    ("new", string_prop("The replacement text.")),
                ],
                vec!["path", "old", "new"],
            ),
            Kind::MakeDir => (
                vec![(
                    "path",
                    string_prop("Folder path, relative to the workspace root."),
                )],
                vec!["path"],
            ),
            Kind::MovePath => (
                vec![
                    ("from", string_prop("Existing file or folder.")),
                    ("to", string_prop("New path; must not exist yet.")),
                ],
                vec!["from", "to"],
            ),
            Kind::DeletePath => (
                vec![("path", string_prop("File or folder to delete."))],
                vec!["path"],
            ),
            Kind::RunCommand => (
                vec![
                    ("command", string_prop("The shell command line to run.")),
                    (
                        "timeout_s",
                        json!({"type": "integer", "minimum": 1, "description": "Seconds before the command is killed. Default: 60."}),
                    ),
                ],
                vec!["command"],
            ),
        };
        let mut properties = Map::new();
        for (k, v) in props {
            properties.insert(k.to_string(), v);
        }
        json!({ "type": "object", "properties": properties, "required": required })
    }
}

struct Builtin {
    kind: Kind,
    parameters: Value,
    ctx: Arc<Ctx>,
}

impl Tool for Builtin {
    fn name(&self) -> &str {
        self.kind.name()
    }

    fn description(&self) -> &str {
        self.kind.description()
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn call(&self, args: Map<String, Value>) -> BoxFuture<'_, Result<String, ToolError>> {
        let ctx = Arc::clone(&self.ctx);
        let kind = self.kind;
        Box::pin(async move { dispatch(kind, ctx, args).await })
    }
}

// ---------------------------------------------------------------------------------------------
// Arguments

fn req_str(args: &Map<String, Value>, name: &str) -> Result<String, ToolError> {
    match args.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(other) => Err(ToolError::Failed(format!(
            "argument `{name}` must be a string, got {other}"
        ))),
        None => Err(ToolError::Failed(format!("missing argument `{name}`"))),
    }
}

fn opt_str(args: &Map<String, Value>, name: &str) -> Result<Option<String>, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => req_str(args, name).map(Some),
    }
}

fn opt_pos_int(args: &Map<String, Value>, name: &str) -> Result<Option<u64>, ToolError> {
    let bad = || ToolError::Failed(format!("argument `{name}` must be a whole number ≥ 1"));
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(v) if v >= 1 => Ok(Some(v)),
            _ => Err(bad()),
        },
        Some(Value::String(s)) => match s.trim().parse::<u64>() {
            Ok(v) if v >= 1 => Ok(Some(v)),
            _ => Err(bad()),
        },
        Some(_) => Err(bad()),
    }
}

fn opt_bool(args: &Map<String, Value>, name: &str) -> Result<bool, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(true),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(false),
        Some(other) => Err(ToolError::Failed(format!(
            "argument `{name}` must be true or false, got {other}"
        ))),
    }
}

async fn blocking<T, F>(f: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ToolError::Failed(format!("the tool task failed: {e}")))?
}

async fn ask(ctx: &Ctx, what: String) -> Result<(), ToolError> {
    if let Some(c) = &ctx.confirm
        && !c.confirm(&what).await
    {
        return Err(ToolError::Refused(
            "the user declined this action; do not retry it, choose another way or give a final answer"
                .to_string(),
        ));
    }
    Ok(())
}

fn preview(text: &str, max_lines: usize) -> String {
    let mut out: String = text.lines().take(max_lines).collect::<Vec<_>>().join("\n");
    let n = text.lines().count();
    if n > max_lines {
        out.push_str(&format!("\n[… {} more lines]", n - max_lines));
    }
    out
}

async fn dispatch(
    kind: Kind,
    ctx: Arc<Ctx>,
    args: Map<String, Value>,
) -> Result<String, ToolError> {
    match kind {
        Kind::ReadFile => {
            let path = req_str(&args, "path")?;
            let start = opt_pos_int(&args, "start_line")?;
            let end = opt_pos_int(&args, "end_line")?;
            not_a_folder_path(&path)?;
            blocking(move || read_file(&ctx.ws, &ctx.limits, &path, start, end)).await
        }
        Kind::ListDir => {
            let path = opt_str(&args, "path")?.unwrap_or_else(|| ".".to_string());
            let recursive = opt_bool(&args, "recursive")?;
            blocking(move || list_dir(&ctx.ws, &ctx.limits, &path, recursive)).await
        }
        Kind::SearchFiles => {
            let pattern = req_str(&args, "pattern")?;
            let path = opt_str(&args, "path")?.unwrap_or_else(|| ".".to_string());
            blocking(move || search_files(&ctx.ws, &ctx.limits, &pattern, &path)).await
        }
        Kind::WriteFile => {
            let path = req_str(&args, "path")?;
            let content = req_str(&args, "content")?;
            not_a_folder_path(&path)?;
            let target = ctx.ws.resolve(&path, Access::Write)?;
            let shown = ctx.ws.display(&target);
            let existing = existing_file_len(&target, &shown)?;
            let what = match existing {
                Some(n) => format!(
                    "replace `{shown}` ({n} bytes) with {} bytes:",
                    content.len()
                ),
                None => format!("create `{shown}` with {} bytes:", content.len()),
            };
            ask(
                &ctx,
                format!("write_file: {what}\n{}", preview(&content, 20)),
            )
            .await?;
            blocking(move || {
                ctx.ws.write_atomic(&target, content.as_bytes())?;
                Ok(match existing {
                    Some(n) => format!(
                        "wrote {} bytes to `{shown}` (replaced {n} bytes)",
                        content.len()
                    ),
                    None => format!("wrote {} bytes to `{shown}` (new file)", content.len()),
                })
            })
            .await
        }
        Kind::AppendFile => {
            let path = req_str(&args, "path")?;
            let content = req_str(&args, "content")?;
            not_a_folder_path(&path)?;
            let target = ctx.ws.resolve(&path, Access::Write)?;
            let shown = ctx.ws.display(&target);
            let existing = existing_file_len(&target, &shown)?;
            ask(
                &ctx,
                format!(
                    "append_file: append {} bytes to `{shown}`{}:\n{}",
                    content.len(),
                    if existing.is_none() {
                        " (new file)"
                    } else {
                        ""
                    },
                    preview(&content, 20)
                ),
            )
            .await?;
            blocking(move || {
                let len = ctx.ws.append(&target, content.as_bytes())?;
                Ok(format!(
                    "appended {} bytes to `{shown}` (now {len} bytes)",
                    content.len(),
                ))
            })
            .await
        }
        Kind::EditFile => {
            let path = req_str(&args, "path")?;
            let old = req_str(&args, "old")?;
            let new = req_str(&args, "new")?;
            not_a_folder_path(&path)?;
            let target = ctx.ws.resolve(&path, Access::Read)?;
            let shown = ctx.ws.display(&target);
            let text = read_text_for_edit(&ctx.ws, &target, &shown, ctx.limits.edit_max_bytes)?;
            let at = find_unique(&text, &old, &shown)?;
            let line = text[..at].matches('\n').count() + 1;
            ask(
                &ctx,
                format!(
                    "edit_file: in `{shown}` at line {line}, replace\n{}\nwith\n{}",
                    preview(&old, 15),
                    preview(&new, 15)
                ),
            )
            .await?;
            blocking(move || {
                let mut out = String::with_capacity(text.len() + new.len());
                out.push_str(&text[..at]);
                out.push_str(&new);
                out.push_str(&text[at + old.len()..]);
                ctx.ws.write_atomic(&target, out.as_bytes())?;
                Ok(format!(
                    "edited `{shown}`: replaced 1 occurrence at line {line}"
                ))
            })
            .await
        }
        Kind::MakeDir => {
            let path = req_str(&args, "path")?;
            let target = ctx.ws.resolve(&path, Access::Write)?;
            let shown = ctx.ws.display(&target);
            match fs::symlink_metadata(&target) {
                Ok(m) if m.is_dir() => return Ok(format!("folder `{shown}` already exists")),
                Ok(_) => {
                    return Err(ToolError::Failed(format!(
                        "`{shown}` already exists and is not a folder"
                    )));
                }
                Err(_) => {}
            }
            ask(&ctx, format!("make_dir: create folder `{shown}`")).await?;
            blocking(move || {
                ctx.ws.make_dir(&target)?;
                Ok(format!("created folder `{shown}`"))
            })
            .await
        }
        Kind::MovePath => {
            let from = req_str(&args, "from")?;
            let to = req_str(&args, "to")?;
            let src = ctx.ws.resolve(&from, Access::Entry)?;
            let dst = ctx.ws.resolve(&to, Access::Entry)?;
            let (src_shown, dst_shown) = (ctx.ws.display(&src), ctx.ws.display(&dst));
            let meta = fs::symlink_metadata(&src)
                .map_err(|_| ToolError::Failed(format!("`{from}` not found in the workspace")))?;
            if fs::symlink_metadata(&dst).is_ok() {
                return Err(ToolError::Failed(format!(
                    "`{dst_shown}` already exists; delete it first or choose another name"
                )));
            }
            if meta.is_dir() && dst.starts_with(&src) {
                return Err(ToolError::Failed(format!(
                    "cannot move folder `{src_shown}` into itself (`{dst_shown}`)"
                )));
            }
            ask(
                &ctx,
                format!("move_path: move `{src_shown}` to `{dst_shown}`"),
            )
            .await?;
            blocking(move || {
                ctx.ws.rename(&src, &dst)?;
                Ok(format!("moved `{src_shown}` to `{dst_shown}`"))
            })
            .await
        }
        Kind::DeletePath => {
            let path = req_str(&args, "path")?;
            let target = ctx.ws.resolve(&path, Access::Entry)?;
            let shown = ctx.ws.display(&target);
            let meta = fs::symlink_metadata(&target)
                .map_err(|_| ToolError::Failed(format!("`{path}` not found in the workspace")))?;
            let is_dir = meta.is_dir();
            let what = if is_dir {
                format!("delete_path: delete folder `{shown}` and everything in it")
            } else if meta.file_type().is_symlink() {
                format!("delete_path: delete the symbolic link `{shown}` (not its target)")
            } else {
                format!("delete_path: delete file `{shown}` ({} bytes)", meta.len())
            };
            ask(&ctx, what).await?;
            blocking(move || {
                ctx.ws.remove(&target)?;
                Ok(if is_dir {
                    format!("deleted folder `{shown}` and its contents")
                } else {
                    format!("deleted `{shown}`")
                })
            })
            .await
        }
        Kind::RunCommand => {
            let command = req_str(&args, "command")?;
            if command.trim().is_empty() {
                return Err(ToolError::Failed("the command is empty".to_string()));
            }
            let timeout = match opt_pos_int(&args, "timeout_s")? {
                Some(s) => Duration::from_secs(s).min(ctx.limits.command_max_timeout),
                None => ctx.limits.command_timeout,
            };
            ask(
                &ctx,
                format!(
                    "run_command: sh -c {command:?}\n  in {} (timeout {} s)",
                    ctx.ws.root().display(),
                    timeout.as_secs()
                ),
            )
            .await?;
            let out = run_shell(
                &command,
                ctx.ws.root(),
                timeout,
                ctx.limits.command_output_max_bytes,
                &ctx.child_env,
            )
            .await?;
            if out.timed_out {
                Err(ToolError::Failed(format!(
                    "timed out after {} s; the command and every process it started were killed. Output so far:\n{}",
                    timeout.as_secs(),
                    out.render()
                )))
            } else {
                Ok(out.render())
            }
        }
    }
}

fn existing_file_len(target: &Path, shown: &str) -> Result<Option<u64>, ToolError> {
    match fs::symlink_metadata(target) {
        Ok(m) if m.is_dir() => Err(ToolError::Failed(format!("`{shown}` is a folder"))),
        Ok(m) => Ok(Some(m.len())),
        Err(_) => Ok(None),
    }
}

/// A path the model ended with `/` (or `/.`) names a folder; file tools refuse it rather than
/// quietly acting on a file of that name (the kernel would refuse `notes.txt/` too).
fn not_a_folder_path(path: &str) -> Result<(), ToolError> {
    if path.ends_with('/') || path.ends_with("/.") || path == "." {
        return Err(ToolError::Failed(format!(
            "`{path}` ends with `/`, which names a folder; give the file's path without the trailing `/`"
        )));
    }
    Ok(())
}

/// The whole text of a file for `edit_file`, refusing files above `max` bytes (the edit holds
/// the old and the new text at once) before reading anything.
fn read_text_for_edit(
    ws: &Workspace,
    target: &Path,
    shown: &str,
    max: u64,
) -> Result<String, ToolError> {
    let file = ws.open_read(target)?;
    let meta = file
        .metadata()
        .map_err(|e| ToolError::Failed(format!("cannot read `{shown}`: {e}")))?;
    if meta.is_dir() {
        return Err(ToolError::Failed(format!("`{shown}` is a folder")));
    }
    if meta.len() > max {
        return Err(ToolError::Failed(format!(
            "`{shown}` has {} bytes; edit_file changes files of at most {max} bytes. Use write_file to replace it whole, or run_command if it is allowed",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::Failed(format!("cannot read `{shown}`: {e}")))?;
    if bytes.len() as u64 > max {
        return Err(ToolError::Failed(format!(
            "`{shown}` grew past {max} bytes while it was read; nothing was changed"
        )));
    }
    String::from_utf8(bytes).map_err(|_| {
        ToolError::Failed(format!(
            "`{shown}` is not UTF-8 text; edit_file cannot change it"
        ))
    })
}

/// The byte offset of the only occurrence of `old` in `text` (overlapping occurrences count).
fn find_unique(text: &str, old: &str, shown: &str) -> Result<usize, ToolError> {
    if old.is_empty() {
        return Err(ToolError::Refused(
            "`old` is empty; give the exact text to replace".to_string(),
        ));
    }
    let mut hits = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find(old) {
        let at = from + i;
        hits.push(at);
        // Step one character so that overlapping matches are counted too.
        from = at + text[at..].chars().next().map_or(1, char::len_utf8);
        if hits.len() > 50 {
            break;
        }
    }
    match hits.len() {
        1 => Ok(hits[0]),
        0 => {
            let hint = if text.contains(old.trim()) && !old.trim().is_empty() {
                " (it matches when leading/trailing whitespace is ignored: copy the exact text from read_file)"
            } else {
                " (check spelling, whitespace and indentation: copy the exact text from read_file)"
            };
            Err(ToolError::Refused(format!(
                "`old` was not found in `{shown}`{hint}; nothing was changed"
            )))
        }
        n => {
            let lines: Vec<String> = hits
                .iter()
                .take(10)
                .map(|&at| (text[..at].matches('\n').count() + 1).to_string())
                .collect();
            let more = if n > 50 { "more than 50" } else { "" };
            let count = if more.is_empty() {
                n.to_string()
            } else {
                more.to_string()
            };
            Err(ToolError::Refused(format!(
                "`old` matches {count} times in `{shown}` (at lines {}); include more surrounding text so it matches exactly once; nothing was changed",
                lines.join(", ")
            )))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Read-only tools

fn read_file(
    ws: &Workspace,
    limits: &Limits,
    path: &str,
    start: Option<u64>,
    end: Option<u64>,
) -> Result<String, ToolError> {
    let target = ws.resolve(path, Access::Read)?;
    let shown = ws.display(&target);
    let file = ws.open_read(&target)?;
    let meta = file
        .metadata()
        .map_err(|e| ToolError::Failed(format!("`{shown}`: {e}")))?;
    if meta.is_dir() {
        return Err(ToolError::Failed(format!(
            "`{shown}` is a folder; use list_dir to see what it contains"
        )));
    }
    if let (Some(s), Some(e)) = (start, end)
        && e < s
    {
        return Err(ToolError::Failed(format!(
            "end_line ({e}) is before start_line ({s})"
        )));
    }
    let io = |e: std::io::Error| ToolError::Failed(format!("cannot read `{shown}`: {e}"));
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    {
        let head = reader.fill_buf().map_err(io)?;
        if head.iter().take(8192).any(|&b| b == 0) {
            return Err(ToolError::Failed(format!(
                "`{shown}` looks like a binary file ({} bytes); read_file shows text only",
                meta.len()
            )));
        }
    }
    let cap = limits.read_max_bytes;
    let whole = start.is_none() && end.is_none();
    let start = start.unwrap_or(1);
    let mut out: Vec<u8> = Vec::new();
    let mut line_no: u64 = 0;
    // The last line shown, and whether it was itself cut (longer than what was left of the cap).
    let mut cut_after: Option<(u64, bool)> = None;
    loop {
        let keep = if line_no + 1 < start {
            0
        } else {
            cap - out.len()
        };
        let before = out.len();
        let Some(line) = read_line_capped(&mut reader, &mut out, keep).map_err(io)? else {
            break;
        };
        line_no += 1;
        if line_no < start {
            continue;
        }
        if let Some(e) = end
            && line_no > e
        {
            out.truncate(before);
            break;
        }
        if line.len > line.kept as u64 {
            if before == 0 {
                // A single line longer than the cap: show its beginning, say it was cut.
                cut_after = Some((line_no, true));
            } else {
                out.truncate(before);
                cut_after = Some((line_no - 1, false));
            }
            break;
        }
    }
    if line_no == 0 {
        return Ok("(empty file)".to_string());
    }
    if line_no < start && cut_after.is_none() {
        return Err(ToolError::Failed(format!(
            "start_line {start} is past the end of `{shown}` ({line_no} lines)"
        )));
    }
    let shown_bytes = out.len();
    let mut text = into_text(out);
    match cut_after {
        None => {}
        Some((last, true)) => text.push_str(&format!(
            "\n[… cut: line {last} of `{shown}` is longer than {cap} bytes; this shows its first {shown_bytes} bytes and the rest of that line cannot be shown. Read on with start_line={}.]",
            last + 1
        )),
        Some((last, false)) if whole => text.push_str(&format!(
            "\n[… cut: `{shown}` has {} bytes; this shows the first {shown_bytes} bytes (lines 1-{last}). Read on with start_line={}.]",
            meta.len(),
            last + 1
        )),
        Some((last, false)) => text.push_str(&format!(
            "\n[… cut at {cap} bytes: this shows lines {start}-{last}. Read on with start_line={}.]",
            last + 1
        )),
    }
    Ok(text)
}

/// One line as [`read_line_capped`] saw it: its full length and how many bytes were kept.
struct LineRead {
    len: u64,
    kept: usize,
}

/// Read one line (up to and including `\n`) from `reader`, appending at most `keep` of its bytes
/// to `out` and skipping the rest, so that memory stays bounded whatever the line's length.
/// `None` at the end of the file.
fn read_line_capped(
    reader: &mut impl BufRead,
    out: &mut Vec<u8>,
    keep: usize,
) -> std::io::Result<Option<LineRead>> {
    let mut line = LineRead { len: 0, kept: 0 };
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok((line.len > 0).then_some(line));
        }
        let (chunk, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        let take = chunk.len().min(keep - line.kept);
        out.extend_from_slice(&chunk[..take]);
        line.kept += take;
        line.len += chunk.len() as u64;
        let used = chunk.len();
        reader.consume(used);
        if done {
            return Ok(Some(line));
        }
    }
}

/// Bytes as text without a copy when they are valid UTF-8 (invalid sequences become U+FFFD).
fn into_text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn walker(root: &Path, max_depth: Option<usize>) -> ignore::Walk {
    ignore::WalkBuilder::new(root)
        .hidden(false)
        .parents(true)
        .ignore(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .max_depth(max_depth)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| e.file_name() != ".git")
        .build()
}

fn list_dir(
    ws: &Workspace,
    limits: &Limits,
    path: &str,
    recursive: bool,
) -> Result<String, ToolError> {
    let dir = ws.resolve(path, Access::Read)?;
    let shown = ws.display(&dir);
    if !dir.is_dir() {
        return Err(ToolError::Failed(format!(
            "`{shown}` is a file, not a folder; use read_file to read it"
        )));
    }
    let mut lines = Vec::new();
    let mut cut = false;
    for entry in walker(&dir, if recursive { None } else { Some(1) }) {
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        if lines.len() >= limits.list_max_entries {
            cut = true;
            break;
        }
        let rel = ws.display(entry.path());
        let line = match entry.file_type() {
            Some(ft) if ft.is_dir() => format!("{rel}/"),
            Some(ft) if ft.is_symlink() => format!("{rel} (symbolic link)"),
            Some(ft) if ft.is_file() => rel,
            _ => format!("{rel} (special file)"),
        };
        lines.push(line);
    }
    if lines.is_empty() {
        return Ok(format!("`{shown}` is empty"));
    }
    let mut out = lines.join("\n");
    if cut {
        out.push_str(&format!(
            "\n[… cut at {} entries; list a sub-folder to see more]",
            limits.list_max_entries
        ));
    }
    Ok(out)
}

fn cut_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

fn search_files(
    ws: &Workspace,
    limits: &Limits,
    pattern: &str,
    path: &str,
) -> Result<String, ToolError> {
    let matcher = RegexMatcherBuilder::new()
        .build(pattern)
        .map_err(|e| ToolError::Failed(format!("invalid regular expression: {e}")))?;
    let root = ws.resolve(path, Access::Read)?;
    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(0))
        .line_number(true)
        // The searcher keeps a whole line in memory: bound it (a longer line is an error, and
        // that file is named as skipped).
        .heap_limit(Some(limits.search_max_line_bytes))
        .build();
    let mut skipped: Vec<String> = Vec::new();
    let mut hits: Vec<String> = Vec::new();
    let max = limits.search_max_matches;
    let mut cut = false;
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in walker(&root, None) {
        let Ok(entry) = entry else { continue };
        // tagloop's own configuration and secret files are never searched (silently: the
        // model learns nothing about their content, not even whether a pattern matches).
        if entry.file_type().is_some_and(|ft| ft.is_file()) && !is_protected_name(entry.file_name())
        {
            files.push(entry.into_path());
        }
    }
    for file in files {
        if cut {
            break;
        }
        let rel = ws.display(&file);
        // Open through the workspace's handle, following no link: a file swapped for a link
        // after the walk is not searched.
        let handle = match ws.open_read(&file) {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!("search_files: skipping {rel}: {e}");
                continue;
            }
        };
        let result = searcher.search_file(
            &matcher,
            &handle,
            Lossy(|lnum, line| {
                if hits.len() >= max {
                    cut = true;
                    return Ok(false);
                }
                let text = line.trim_end_matches(['\n', '\r']);
                hits.push(format!(
                    "{rel}:{lnum}: {}",
                    cut_chars(text, limits.search_max_line_chars)
                ));
                Ok(true)
            }),
        );
        if let Err(e) = result {
            tracing::debug!("search_files: skipping {rel}: {e}");
            if e.to_string().contains("allocation limit") {
                skipped.push(rel);
            }
        }
    }
    let skipped_note = if skipped.is_empty() {
        String::new()
    } else {
        format!(
            "\n[skipped, a line longer than {} bytes: {}]",
            limits.search_max_line_bytes,
            skipped.join(", ")
        )
    };
    if hits.is_empty() {
        return Ok(format!(
            "no matches for /{pattern}/ in `{}`{skipped_note}",
            ws.display(&root)
        ));
    }
    let mut out = hits.join("\n");
    out.push_str(&skipped_note);
    if cut {
        out.push_str(&format!(
            "\n[… cut at {max} matches; use a narrower pattern or path]"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_match_finds_offsets_and_counts_overlaps() {
        assert_eq!(find_unique("abc", "b", "f").ok(), Some(1));
        let e = find_unique("aaa", "aa", "f").unwrap_err();
        assert!(e.to_string().contains("matches 2 times"), "{e}");
        let e = find_unique("x\ny\nx", "x", "f").unwrap_err();
        assert!(e.to_string().contains("lines 1, 3"), "{e}");
        assert!(matches!(
            find_unique("abc", "", "f"),
            Err(ToolError::Refused(_))
        ));
    }

    #[test]
    fn schemas_keep_spec_order() {
        let p = Kind::ReadFile.parameters();
        let keys: Vec<&String> = p["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["path", "start_line", "end_line"]);
        let p = Kind::EditFile.parameters();
        let keys: Vec<&String> = p["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["path", "old", "new"]);
    }

    #[test]
    fn cut_chars_marks_cut() {
        assert_eq!(cut_chars("héllo", 2), "hé…");
        assert_eq!(cut_chars("hi", 5), "hi");
    }
}
