//! Path-valued parameters: the schema annotation that marks one, the kind of path it names, the
//! workspace's paths such a parameter may name when the grammar is given them, and the bound on
//! a path the grammar is not given the paths for.

use serde_json::Value;

/// The JSON Schema annotation that marks a string parameter as naming a path:
/// `"x-tagloop-path": "file" | "dir" | "any"` on the property for a path that exists, `"new"` for
/// one the call may create. Where the grammar is given the workspace's paths ([`KnownPaths`]), a
/// parameter naming a path that exists may only name one of them; every other path parameter is
/// one line (no newline, no escape, a triple-quoted body on one line too), so a model cannot fill
/// its turn with a path that never closes its quote.
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
    /// A path the call may create, existing or not (`write_file.path`, `move_path.to`): never
    /// limited to the known paths, only shaped as a path (one line).
    New,
}

impl PathKind {
    /// The annotation's value: `file`, `dir`, `any` or `new`.
    pub fn as_str(self) -> &'static str {
        match self {
            PathKind::File => "file",
            PathKind::Dir => "dir",
            PathKind::Any => "any",
            PathKind::New => "new",
        }
    }

    /// The kind a schema's [`PATH_ANNOTATION`] names; `None` without one (or with a value that
    /// is not `file`, `dir`, `any` or `new`: an unknown kind leaves the parameter free).
    pub fn of_schema(schema: &Value) -> Option<PathKind> {
        match schema.get(PATH_ANNOTATION)?.as_str()? {
            "file" => Some(PathKind::File),
            "dir" => Some(PathKind::Dir),
            "any" => Some(PathKind::Any),
            "new" => Some(PathKind::New),
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

    /// The paths a parameter of that kind may name: folders first for `Any`, none for `New`
    /// (a path to create is not limited to the ones that exist).
    pub(super) fn of_kind(&self, kind: PathKind) -> Vec<&str> {
        let (dirs, files) = match kind {
            PathKind::File => (false, true),
            PathKind::Dir => (true, false),
            PathKind::Any => (true, true),
            PathKind::New => (false, false),
        };
        let dirs = self.dirs.iter().filter(|_| dirs);
        let files = self.files.iter().filter(|_| files);
        dirs.chain(files).map(String::as_str).collect()
    }
}
