//! Tools: the [`Tool`] trait, a [`Registry`], tools built from closures, the built-in workspace
//! toolkit and MCP servers as tool sources.

mod builtin;
mod children;
mod closure;
mod confirm;
mod error;
mod mcp;
mod shell;
mod workspace;

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use crate::protocol::PathKind;

pub use builtin::{
    Limits, MAX_LISTED_BYTES, MAX_LISTED_PATHS, ToolkitOptions, list_paths, toolkit,
};
pub use children::ChildEnv;
// The binary's process-tree housekeeping (its own process made a subreaper, its children killed
// on exit); public only because the binary is a separate crate on this library. Hidden: not part
// of the library's API, may change at any time.
#[doc(hidden)]
pub use children::{harden_process, kill_all_descendants, spawn_orphan_reaper};
pub use closure::{FnTool, tool_fn};
pub use confirm::{Confirm, FixedConfirm, TerminalConfirm};
pub use error::ToolError;
pub use mcp::{McpAccess, McpError, McpOptions, McpSource};
pub use shell::{CommandOutput, Process, run_process, run_shell};
pub use workspace::{Access, Workspace, WorkspaceError, is_protected_name};

/// A tool the model can call; offer it in a [`Registry`], where its [`name`](Tool::name) is its
/// key.
pub trait Tool: Send + Sync {
    /// The name the model writes (`read_file`, `fs.read_file`).
    fn name(&self) -> &str;
    /// What it does, written for a model.
    fn description(&self) -> &str;
    /// Its parameters as a JSON Schema object (`properties` in declaration order, `required`).
    fn parameters(&self) -> &Value;
    /// Run it with arguments already bound to [`Tool::parameters`].
    fn call(&self, args: Map<String, Value>) -> BoxFuture<'_, Result<String, ToolError>>;
    /// The parameters that name a path (relative to the workspace root), and of which kind.
    /// Those of a kind that must already exist (`File`, `Dir`, `Any`) the turn grammar limits
    /// to the paths that exist when the workspace is small enough (see [`list_paths`]); declare
    /// a path the tool creates (`write_file.path`) as [`PathKind::New`], or the model could
    /// not name it. Every path the grammar does not list is one line. Default: the string
    /// properties of [`Tool::parameters`] annotated
    /// [`PATH_ANNOTATION`](crate::protocol::PATH_ANNOTATION) (`"x-tagloop-path": "file" | "dir" |
    /// "any" | "new"`), which is how an MCP server's tool opts in.
    fn path_parameters(&self) -> Vec<(String, PathKind)> {
        annotated_paths(self.parameters())
    }
    /// The workspace this tool's paths are relative to, when it works in one (the built-in
    /// toolkit). Default: none; a tool's path parameters are then taken relative to the
    /// workspace of the registry's first tool that has one.
    fn workspace(&self) -> Option<&Workspace> {
        None
    }
}

/// The string properties of a parameters schema annotated
/// [`PATH_ANNOTATION`](crate::protocol::PATH_ANNOTATION), in declared order.
pub fn annotated_paths(parameters: &Value) -> Vec<(String, PathKind)> {
    let Some(props) = parameters.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    props
        .iter()
        .filter_map(|(name, schema)| Some((name.clone(), PathKind::of_schema(schema)?)))
        .collect()
}

/// The tools offered to a model, in the order they were added.
#[derive(Clone, Default)]
pub struct Registry {
    tools: Vec<Arc<dyn Tool>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|t| t.name()))
            .finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a tool; a later tool with the same name replaces the earlier one.
    pub fn add(&mut self, tool: Arc<dyn Tool>) {
        if let Some(slot) = self.tools.iter_mut().find(|t| t.name() == tool.name()) {
            *slot = tool;
        } else {
            self.tools.push(tool);
        }
    }

    /// Add every tool of another registry.
    pub fn extend(&mut self, other: Registry) {
        for tool in other.tools {
            self.add(tool);
        }
    }

    /// The tool of that name (as the model writes it), if the registry has one.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// All tools in order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.iter()
    }

    /// The tool names in the order they were added (a replaced tool keeps its place).
    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    /// How many tools there are.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The known name closest to `name` (case-insensitive edit distance), if any is reasonably close.
    pub fn closest(&self, name: &str) -> Option<&str> {
        let wanted = name.to_lowercase();
        self.tools
            .iter()
            .map(|t| (edit_distance(&wanted, &t.name().to_lowercase()), t.name()))
            .filter(|(d, n)| *d <= (n.chars().count() / 2).max(2))
            .min_by_key(|(d, _)| *d)
            .map(|(_, n)| n)
    }
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("read_file", "read_file"), 0);
        assert_eq!(edit_distance("read_fle", "read_file"), 1);
        assert_eq!(edit_distance("readfile", "read_file"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
