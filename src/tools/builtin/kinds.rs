//! The ten built-in tools as the model sees them: each one's name, description and JSON
//! Schema, in the order the system prompt lists them.

use serde_json::{Map, Value, json};

use crate::protocol::PathKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
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

pub(super) fn string_prop(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
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

    pub(super) fn description(self) -> &'static str {
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

    /// The parameters that name a path, and of which kind: a path that must exist before the
    /// call (`File`, `Dir`, `Any`: the grammar may limit it to the workspace's paths), or one
    /// the tool may create (`New`: `write_file`, `append_file`, `make_dir`, `move_path.to`;
    /// never limited to the paths that exist, or the model could not name it, but still one
    /// bounded line in the grammar).
    pub(super) fn path_params(self) -> &'static [(&'static str, PathKind)] {
        match self {
            Kind::ReadFile | Kind::EditFile => &[("path", PathKind::File)],
            Kind::ListDir => &[("path", PathKind::Dir)],
            Kind::SearchFiles | Kind::DeletePath => &[("path", PathKind::Any)],
            Kind::MovePath => &[("from", PathKind::Any), ("to", PathKind::New)],
            Kind::WriteFile | Kind::AppendFile | Kind::MakeDir => &[("path", PathKind::New)],
            Kind::RunCommand => &[],
        }
    }

    pub(super) fn parameters(self) -> Value {
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
