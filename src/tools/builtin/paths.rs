//! The paths of a small workspace, for turn grammars that limit path-valued parameters to the
//! paths that exist (issue 24): a model that writes `read_file(path="april.md")` when the file
//! is `notes/april.md` is steered to the real path.
//!
//! The walk is the toolkit's own (`list_dir`'s and `search_files`' walker: ignore files
//! respected, hidden files shown, `.git` never entered, symbolic links never followed by the
//! walk), and each path it lists is then checked with [`Workspace::resolve`], the check every
//! tool call passes: a path is listed only if a tool would accept it (not a protected file,
//! no link out of the workspace, no backslash, valid UTF-8). A link that stays inside is listed
//! as what it points to (a file or a folder).
//!
//! Bounded: the walk stops at the first entry past [`MAX_LISTED_PATHS`] or past
//! [`MAX_LISTED_BYTES`] of path text, and the workspace is then "too large" (path parameters
//! stay free strings). The caps keep the grammar's alternation small next to its budget
//! (16 KiB of paths against 128 KiB of rules per schema) and the walk cheap enough to repeat
//! before every turn.

use crate::protocol::KnownPaths;
use crate::tools::workspace::{Access, Workspace};

use super::search::walker;

/// Most entries (files and folders, the root not counted) a listed workspace may have.
pub const MAX_LISTED_PATHS: usize = 200;

/// Most bytes of path text (the relative paths together) a listed workspace may have.
pub const MAX_LISTED_BYTES: usize = 16 * 1024;

/// The files and folders of `ws`, relative to its root (folders with `.` first), or `None` when
/// the workspace has more than [`MAX_LISTED_PATHS`] entries or [`MAX_LISTED_BYTES`] of path
/// text. Entries a tool would refuse are left out (and still counted against the caps, so the
/// walk stays bounded whatever the workspace holds).
pub fn list_paths(ws: &Workspace) -> Option<KnownPaths> {
    list_paths_capped(ws, MAX_LISTED_PATHS, MAX_LISTED_BYTES)
}

/// [`list_paths`] with the caps given.
pub(crate) fn list_paths_capped(
    ws: &Workspace,
    max_paths: usize,
    max_bytes: usize,
) -> Option<KnownPaths> {
    let mut files = Vec::new();
    let mut dirs = vec![".".to_owned()];
    let (mut seen, mut bytes) = (0usize, 0usize);
    for entry in walker(ws.root(), None) {
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        seen += 1;
        if seen > max_paths {
            return None;
        }
        // Paths that are not UTF-8 cannot be written by a model: skipped.
        let Some(rel) = entry
            .path()
            .strip_prefix(ws.root())
            .ok()
            .and_then(|p| p.to_str())
        else {
            continue;
        };
        bytes += rel.len();
        if bytes > max_bytes {
            return None;
        }
        // The tools' own check: what it refuses, a model cannot use.
        let Ok(resolved) = ws.resolve(rel, Access::Read) else {
            continue;
        };
        if resolved.is_dir() {
            dirs.push(rel.to_owned());
        } else if resolved.is_file() {
            files.push(rel.to_owned());
        }
    }
    Some(KnownPaths::new(files, dirs))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn lists_files_and_folders_relative_to_the_root() {
        let (_d, ws) = ws_with(&["notes/april.md", "a.txt", ".hidden"]);
        let known = list_paths(&ws).expect("small");
        assert_eq!(known.files(), [".hidden", "a.txt", "notes/april.md"]);
        assert_eq!(known.dirs(), [".", "notes"]);
    }

    #[test]
    fn leaves_out_what_the_tools_refuse() {
        let (d, ws) = ws_with(&["ok.txt", ".env", "sub/tagloop.toml", ".git/config"]);
        std::os::unix::fs::symlink("/etc", d.path().join("out")).expect("link");
        std::os::unix::fs::symlink("ok.txt", d.path().join("in")).expect("link");
        let known = list_paths(&ws).expect("small");
        assert_eq!(known.files(), ["in", "ok.txt"]);
        assert_eq!(known.dirs(), [".", "sub"]);
    }

    #[test]
    fn a_workspace_over_either_cap_is_not_listed() {
        let names: Vec<String> = (0..5).map(|i| format!("f{i}.txt")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let (_d, ws) = ws_with(&refs);
        assert!(list_paths_capped(&ws, 5, 1000).is_some());
        assert!(list_paths_capped(&ws, 4, 1000).is_none());
        // Five names of six bytes: 30 bytes.
        assert!(list_paths_capped(&ws, 100, 30).is_some());
        assert!(list_paths_capped(&ws, 100, 29).is_none());
    }
}
