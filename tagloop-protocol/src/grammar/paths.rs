//! Path-valued parameters: the schema annotation that marks one, the kind of path it names, and
//! the workspace's paths such a parameter may name when the grammar is given them.

use serde_json::Value;

/// The JSON Schema annotation that marks a string parameter as naming a path that exists:
/// `"x-tagloop-path": "file" | "dir" | "any"` on the property. Where the grammar is given the
/// workspace's paths ([`KnownPaths`]), such a parameter may only name one of them.
pub const PATH_ANNOTATION: &str = "x-tagloop-path";

/// What a path-valued parameter names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PathKind {
    /// A file that exists (`read_file.path`).
    File,
    /// A folder that exists, `.` (the root) included (`list_dir.path`).
    Dir,
    /// A file or a folder that exists (`search_files.path`).
    Any,
}

impl PathKind {
    /// The annotation's value: `file`, `dir` or `any`.
    pub fn as_str(self) -> &'static str {
        match self {
            PathKind::File => "file",
            PathKind::Dir => "dir",
            PathKind::Any => "any",
        }
    }

    /// The kind a schema's [`PATH_ANNOTATION`] names; `None` without one (or with a value that
    /// is not `file`, `dir` or `any`: an unknown kind leaves the parameter free).
    pub fn of_schema(schema: &Value) -> Option<PathKind> {
        match schema.get(PATH_ANNOTATION)?.as_str()? {
            "file" => Some(PathKind::File),
            "dir" => Some(PathKind::Dir),
            "any" => Some(PathKind::Any),
            _ => None,
        }
    }
}

/// The paths of a workspace that path-valued parameters may name, relative to its root and
/// `/`-separated as the tools print them. Empty (the default): such parameters are free
/// strings. The caller bounds the lists (the toolkit lists a workspace only under its cap); a
/// list whose rules do not fit the grammar's budget leaves the parameters free as well.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownPaths {
    files: Vec<String>,
    dirs: Vec<String>,
}

impl KnownPaths {
    /// The files and the folders (give `.` among the folders for the root). Empty strings are
    /// dropped; order is kept (it is the order of the alternatives in the grammar).
    pub fn new(files: Vec<String>, dirs: Vec<String>) -> Self {
        let keep = |v: Vec<String>| v.into_iter().filter(|p| !p.is_empty()).collect();
        KnownPaths {
            files: keep(files),
            dirs: keep(dirs),
        }
    }

    /// The files.
    pub fn files(&self) -> &[String] {
        &self.files
    }

    /// The folders.
    pub fn dirs(&self) -> &[String] {
        &self.dirs
    }

    /// Whether no path is known (path parameters stay free).
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.dirs.is_empty()
    }

    /// The paths a parameter of that kind may name: folders first for `Any`.
    pub(super) fn of_kind(&self, kind: PathKind) -> Vec<&str> {
        let (dirs, files) = match kind {
            PathKind::File => (false, true),
            PathKind::Dir => (true, false),
            PathKind::Any => (true, true),
        };
        let dirs = self.dirs.iter().filter(|_| dirs);
        let files = self.files.iter().filter(|_| files);
        dirs.chain(files).map(String::as_str).collect()
    }
}
