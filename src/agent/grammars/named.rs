//! The files a run's question names, among the paths its grammar allows.
//!
//! The grammar limits a path parameter to the paths the workspace lists. A question about a file
//! that is not there (`logs/mail.log`) then left the model only other files to read, and the
//! named-files notice asked it for a call no grammar let it write. So each file the question
//! names is a path the grammar allows too, unless:
//!
//! - a listed file is that name, or ends with it after a `/` (`week2.txt` beside
//!   `ledger/week2.txt`): the listing's path is the one the model is steered to;
//! - the workspace refuses it (a protected name such as `.env`, a path out of the workspace):
//!   no call could use it;
//! - the question named more than [`MAX_NAMED`] files: the rest stay out, so that a long
//!   question cannot push the path rules past the grammar's budget (which would leave every
//!   path free).

use crate::protocol::KnownPaths;
use crate::tools::{Access, ToolError, Workspace, is_protected_name};

/// The most named files added to a listing.
pub(super) const MAX_NAMED: usize = 16;

/// The listed paths and, among the files, the named ones the listing lacks (see the module
/// docs).
pub(super) fn with_named<'n>(
    ws: &Workspace,
    listed: KnownPaths,
    named: impl IntoIterator<Item = &'n str>,
) -> KnownPaths {
    let mut files = listed.files().to_vec();
    for name in named.into_iter().take(MAX_NAMED) {
        let name = name.trim_start_matches("./");
        let is_it = |f: &String| f == name || f.ends_with(&format!("/{name}"));
        if name.is_empty() || files.iter().any(is_it) || listed.dirs().iter().any(is_it) {
            continue;
        }
        // A missing file is "not found" before its name is weighed: the name is checked too.
        let protected = std::path::Path::new(name)
            .file_name()
            .is_some_and(is_protected_name);
        if protected || matches!(ws.resolve(name, Access::Read), Err(ToolError::Refused(_))) {
            continue;
        }
        files.push(name.to_owned());
    }
    KnownPaths::new(files, listed.dirs().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::list_paths;

    fn ws_with(files: &[&str]) -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().expect("tempdir");
        for f in files {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, "x").expect("write");
        }
        let ws = Workspace::new(dir.path()).expect("workspace");
        (dir, ws)
    }

    fn files(ws: &Workspace, named: &[&str]) -> Vec<String> {
        let listed = list_paths(ws).expect("small");
        with_named(ws, listed, named.iter().copied())
            .files()
            .to_vec()
    }

    #[test]
    fn a_missing_named_file_is_added_after_the_listing() {
        let (_d, ws) = ws_with(&["logs/server.log"]);
        assert_eq!(
            files(&ws, &["logs/mail.log", "./drafts/budget.txt"]),
            ["logs/server.log", "logs/mail.log", "drafts/budget.txt"]
        );
    }

    #[test]
    fn a_listed_path_or_its_last_part_or_a_folder_is_not_added() {
        let (_d, ws) = ws_with(&["ledger/week2.txt", "logs/server.log"]);
        assert_eq!(
            files(
                &ws,
                &["week2.txt", "ledger/week2.txt", "logs", "server.log"]
            ),
            ["ledger/week2.txt", "logs/server.log"]
        );
    }

    #[test]
    fn what_the_workspace_refuses_is_not_added() {
        let (_d, ws) = ws_with(&["a.txt"]);
        assert_eq!(
            files(&ws, &[".env", "../outside.txt", "/etc/passwd"]),
            ["a.txt"]
        );
    }

    #[test]
    fn at_most_max_named_names_are_added() {
        let (_d, ws) = ws_with(&["a.txt"]);
        let names: Vec<String> = (0..40).map(|i| format!("n{i}.txt")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        assert_eq!(files(&ws, &refs).len(), 1 + MAX_NAMED);
    }
}
