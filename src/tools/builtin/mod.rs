//! The built-in workspace toolkit (docs/protocol.md §3): reading, listing and searching always; writing only
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

mod command;
mod kinds;
mod paths;
mod read;
mod search;
#[cfg(test)]
mod tests;
mod write;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::children::ChildEnv;
use super::confirm::Confirm;
use super::workspace::Workspace;
use super::{Registry, Tool, ToolError};

use kinds::Kind;
pub use paths::{MAX_LISTED_BYTES, MAX_LISTED_PATHS, list_paths};

use crate::protocol::PathKind;

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

    fn path_parameters(&self) -> Vec<(String, PathKind)> {
        self.kind
            .path_params()
            .iter()
            .map(|&(name, kind)| (name.to_owned(), kind))
            .collect()
    }

    fn workspace(&self) -> Option<&Workspace> {
        Some(&self.ctx.ws)
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

/// The arguments of a call, as bound to the tool's schema.
type Args = Map<String, Value>;
/// What a tool call gives back: the text the model reads, or why it failed.
type Reply = Result<String, ToolError>;

async fn dispatch(kind: Kind, ctx: Arc<Ctx>, args: Args) -> Reply {
    match kind {
        Kind::ReadFile => read::read_file(ctx, args).await,
        Kind::ListDir => search::list_dir(ctx, args).await,
        Kind::SearchFiles => search::search_files(ctx, args).await,
        Kind::WriteFile => write::write_file(ctx, args).await,
        Kind::AppendFile => write::append_file(ctx, args).await,
        Kind::EditFile => write::edit_file(ctx, args).await,
        Kind::MakeDir => write::make_dir(ctx, args).await,
        Kind::MovePath => write::move_path(ctx, args).await,
        Kind::DeletePath => write::delete_path(ctx, args).await,
        Kind::RunCommand => command::run_command(ctx, args).await,
    }
}
