//! The workspace boundary: every path a model gives is resolved here, inside one root folder.
//!
//! Rules (each refusal is a [`ToolError::Refused`] whose text the model sees):
//!
//! - Paths are relative to the workspace root. An absolute path is accepted only when it lies
//!   inside the (canonical) root; it is then treated as the relative path below the root.
//! - `..` may move up inside the workspace (`a/../b` is `b`) but never above the root.
//! - Symbolic links are resolved component by component, exactly as the kernel would follow them.
//!   A link at any point of the path (in the middle, at the end, through a chain of links) that
//!   leads outside the root is refused, whatever the link's target is (absolute, relative,
//!   dangling). Links that stay inside are followed.
//! - NUL bytes, a leading `~` (home directories are not expanded) and backslashes (they are not
//!   path separators here; a model that writes `src\main.rs` almost always means `src/main.rs`)
//!   are refused.
//! - Reading or writing anything that is not a regular file or a directory (device files, FIFOs,
//!   sockets) is refused.
//! - Writes go to a temporary file in the same directory which is then renamed into place, so a
//!   failed write never leaves half a file behind.
//! - tagloop's own configuration and secret files (`.env`, `.env.*`, `tagloop.toml`, in any
//!   folder, compared without case) are refused: a model must not read the key from them nor
//!   plant a configuration that sends the key elsewhere on the next run (see [`is_protected_name`]).
//!
//! Checking a path and then opening it by name would leave a window in which another process
//! swaps a folder for a symbolic link. So [`Workspace::resolve`] only *decides* (following links
//! that stay inside, refusing the others), and every use goes through a directory handle of the
//! root: the resolved path, which has no links left in it, is opened with `openat2(2)` and
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` on Linux, or else one component at a time with
//! `openat(2)` and `O_NOFOLLOW`. Temporary files, renames (`renameat`), folders (`mkdirat`) and
//! deletions (`unlinkat`) use the handle of the parent folder opened the same way. A link that
//! appears between the decision and the use makes the call fail; it is never followed.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::ToolError;

pub use error::WorkspaceError;

mod error;
mod ops;
mod sys;
#[cfg(test)]
mod tests;

/// How many symbolic links one path may pass through before it is refused (as Linux's `ELOOP`).
const MAX_SYMLINK_HOPS: usize = 40;

/// What the caller is going to do with a resolved path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read it: the path must exist, links are followed, the result is a regular file or a directory.
    Read,
    /// Write it: links are followed; missing trailing components are allowed (they will be created
    /// inside the workspace); an existing target must be a regular file or a directory.
    Write,
    /// Act on the directory entry itself (delete, move): every component but the last is resolved
    /// as for [`Access::Write`], the last one is not followed when it is a symbolic link (the link
    /// itself is deleted or moved, never its target).
    Entry,
}

/// A folder that confines every path the tools accept.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    /// A handle on the root folder: every open, create, rename and delete starts from it.
    root_fd: Arc<OwnedFd>,
}

impl Workspace {
    /// Open a workspace at `root`, which must be an existing directory. The root is canonicalised
    /// (symlinks in the root's own path are resolved once, here).
    pub fn new(root: impl AsRef<Path>) -> Result<Workspace, WorkspaceError> {
        let given = root.as_ref();
        let canonical = fs::canonicalize(given).map_err(|source| WorkspaceError::Root {
            path: given.to_path_buf(),
            source,
        })?;
        if !canonical.is_dir() {
            return Err(WorkspaceError::NotADirectory(given.to_path_buf()));
        }
        let root_fd = sys::open_dir_path(&canonical).map_err(|source| WorkspaceError::Root {
            path: given.to_path_buf(),
            source,
        })?;
        Ok(Workspace {
            root: canonical,
            root_fd: Arc::new(root_fd),
        })
    }

    /// The root, canonicalised when the workspace was opened (absolute, symbolic links resolved).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path shown to the model for a resolved path: relative to the root, `/`-separated,
    /// `.` for the root itself.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => path.to_string_lossy().into_owned(),
        }
    }

    /// Resolve a path the model gave into an absolute path inside the workspace, or refuse it.
    ///
    /// With [`Access::Read`] a missing path is a [`ToolError::Failed`] ("not found"); every escape
    /// is a [`ToolError::Refused`]. An empty path means the root.
    pub fn resolve(&self, user_path: &str, access: Access) -> Result<PathBuf, ToolError> {
        let rel = self.precheck(user_path)?;
        let resolved = if access == Access::Entry {
            self.resolve_entry(user_path, &rel)?
        } else {
            let (resolved, meta) = self.walk(user_path, &rel, access)?;
            self.check_kind(user_path, &resolved, access, meta)?;
            resolved
        };
        // The name the call finally acts on (after links), and the name the model wrote.
        let written = Path::new(user_path).file_name();
        if let Some(name) = resolved
            .file_name()
            .into_iter()
            .chain(written)
            .find(|n| is_protected_name(n))
        {
            return Err(ToolError::Refused(format!(
                "`{user_path}`: `{}` is one of tagloop's own configuration or secret files (.env, .env.*, tagloop.toml); the file tools never read, search, create or change them",
                name.to_string_lossy()
            )));
        }
        Ok(resolved)
    }

    /// Refuse NUL, `~`, backslashes; turn an absolute path inside the root into a relative one.
    fn precheck(&self, user_path: &str) -> Result<PathBuf, ToolError> {
        if user_path.contains('\0') {
            return Err(ToolError::Refused(
                "the path contains a NUL byte".to_string(),
            ));
        }
        if user_path.contains('\\') {
            return Err(ToolError::Refused(format!(
                "`{user_path}`: backslashes are not path separators here; use `/` and a path relative to the workspace"
            )));
        }
        if user_path == "~" || user_path.starts_with("~/") || user_path.starts_with('~') {
            return Err(ToolError::Refused(format!(
                "`{user_path}`: `~` is not expanded; paths are relative to the workspace root"
            )));
        }
        let path = Path::new(user_path);
        if path.is_absolute() {
            // Accept an absolute path that names something below the root, as written (no `..`
            // games: the remainder is still resolved component by component from the root).
            match path.strip_prefix(&self.root) {
                Ok(rest) => Ok(rest.to_path_buf()),
                Err(_) => Err(ToolError::Refused(format!(
                    "`{user_path}` is outside the workspace; use a path relative to the workspace root"
                ))),
            }
        } else {
            Ok(path.to_path_buf())
        }
    }

    fn outside(user_path: &str) -> ToolError {
        ToolError::Refused(format!(
            "`{user_path}` leads outside the workspace; only paths inside the workspace root can be used"
        ))
    }

    /// Resolve `rel` from the root, following links component by component. Also gives the
    /// metadata (not following links) of the resolved path when the walk took it last.
    fn walk(
        &self,
        user_path: &str,
        rel: &Path,
        access: Access,
    ) -> Result<(PathBuf, Option<fs::Metadata>), ToolError> {
        let mut pending: VecDeque<OsString> = VecDeque::new();
        for c in rel.components() {
            match c {
                Component::Normal(n) => pending.push_back(n.to_os_string()),
                Component::ParentDir => pending.push_back(OsString::from("..")),
                Component::CurDir => {}
                // `precheck` made the path relative.
                Component::RootDir | Component::Prefix(_) => return Err(Self::outside(user_path)),
            }
        }
        let mut current = self.root.clone();
        let mut hops = 0usize;
        // Set once a component does not exist: the rest is appended literally (writes only).
        let mut missing = false;
        // The metadata of `current`, when the last step was a plain (non-link) component.
        let mut last: Option<fs::Metadata> = None;
        while let Some(name) = pending.pop_front() {
            last = None;
            if name == ".." {
                if missing {
                    return Err(ToolError::Refused(format!(
                        "`{user_path}`: `..` after a folder that does not exist"
                    )));
                }
                if current == self.root {
                    return Err(Self::outside(user_path));
                }
                current.pop();
                continue;
            }
            let candidate = current.join(&name);
            if missing {
                current = candidate;
                continue;
            }
            match fs::symlink_metadata(&candidate) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    if access == Access::Read {
                        return Err(ToolError::Failed(format!(
                            "`{user_path}` not found in the workspace"
                        )));
                    }
                    missing = true;
                    current = candidate;
                }
                Err(e) => {
                    return Err(ToolError::Failed(format!("`{user_path}`: {e}")));
                }
                Ok(meta) if meta.file_type().is_symlink() => {
                    hops += 1;
                    if hops > MAX_SYMLINK_HOPS {
                        return Err(ToolError::Refused(format!(
                            "`{user_path}`: too many levels of symbolic links"
                        )));
                    }
                    let target = fs::read_link(&candidate)
                        .map_err(|e| ToolError::Failed(format!("`{user_path}`: {e}")))?;
                    let spliced = self.link_target(user_path, &target, &mut current)?;
                    for n in spliced.into_iter().rev() {
                        pending.push_front(n);
                    }
                }
                Ok(meta) => {
                    if !meta.is_dir() && !pending.is_empty() {
                        return Err(ToolError::Failed(format!(
                            "`{user_path}`: `{}` is not a folder",
                            self.display(&candidate)
                        )));
                    }
                    current = candidate;
                    last = Some(meta);
                }
            }
        }
        // Defence in depth: whatever happened above, the result must be below the root.
        if !current.starts_with(&self.root) {
            return Err(Self::outside(user_path));
        }
        Ok((current, last))
    }

    /// The components a symbolic link's `target` puts in place of the link. An absolute target
    /// must lie inside the root (the walk then goes on from the root); a relative one goes on
    /// from `current`, the link's folder.
    fn link_target(
        &self,
        user_path: &str,
        target: &Path,
        current: &mut PathBuf,
    ) -> Result<Vec<OsString>, ToolError> {
        let mut spliced: Vec<OsString> = Vec::new();
        let rest = if target.is_absolute() {
            *current = self.root.clone();
            target
                .strip_prefix(&self.root)
                .map_err(|_| Self::outside(user_path))?
        } else {
            target
        };
        for c in rest.components() {
            match c {
                Component::Normal(n) => spliced.push(n.to_os_string()),
                Component::ParentDir => spliced.push(OsString::from("..")),
                Component::CurDir => {}
                Component::RootDir | Component::Prefix(_) => return Err(Self::outside(user_path)),
            }
        }
        Ok(spliced)
    }

    /// Refuse device files, FIFOs, sockets.
    fn check_kind(
        &self,
        user_path: &str,
        path: &Path,
        access: Access,
        known: Option<fs::Metadata>,
    ) -> Result<(), ToolError> {
        match known.map_or_else(|| fs::symlink_metadata(path), Ok) {
            Ok(meta) => {
                let ft = meta.file_type();
                if ft.is_file() || ft.is_dir() {
                    Ok(())
                } else {
                    Err(ToolError::Refused(format!(
                        "`{user_path}` is not a regular file or folder (device, FIFO or socket)"
                    )))
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && access != Access::Read => Ok(()),
            Err(e) => Err(ToolError::Failed(format!("`{user_path}`: {e}"))),
        }
    }

    /// Resolve for acting on the entry itself: the parent is followed, the last name is not.
    fn resolve_entry(&self, user_path: &str, rel: &Path) -> Result<PathBuf, ToolError> {
        match rel.components().next_back() {
            Some(Component::Normal(name)) => {
                let parent = rel.parent().unwrap_or(Path::new(""));
                let parent_str = parent.to_string_lossy();
                let (dir, _) = self.walk(user_path, parent, Access::Write)?;
                if let Ok(meta) = fs::symlink_metadata(&dir)
                    && !meta.is_dir()
                {
                    return Err(ToolError::Failed(format!(
                        "`{user_path}`: `{}` is not a folder",
                        if parent_str.is_empty() {
                            "."
                        } else {
                            &parent_str
                        }
                    )));
                }
                let entry = dir.join(name);
                if !entry.starts_with(&self.root) || entry == self.root {
                    return Err(Self::outside(user_path));
                }
                Ok(entry)
            }
            _ => {
                // `.`, `..` or empty as the last component: the entry is a real directory.
                let (resolved, _) = self.walk(user_path, rel, Access::Read)?;
                if resolved == self.root {
                    return Err(ToolError::Refused(format!(
                        "`{user_path}` is the workspace root itself"
                    )));
                }
                Ok(resolved)
            }
        }
    }

    /// The path below the root, as plain names (a resolved path never has `..` or links).
    fn rel<'a>(&self, path: &'a Path) -> Result<&'a Path, ToolError> {
        path.strip_prefix(&self.root).map_err(|_| {
            ToolError::Refused(format!("`{}` is not inside the workspace", path.display()))
        })
    }

    /// Turn an I/O error of a handle-based call into what the model sees; a link met on the way
    /// (`ELOOP`, or `EXDEV` from `RESOLVE_BENEATH`) means the path changed under us.
    fn io_err(&self, what: &str, path: &Path, e: std::io::Error) -> ToolError {
        let shown = self.display(path);
        match e.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::EXDEV) => ToolError::Refused(format!(
                "`{shown}` changed while it was being used (a symbolic link appeared on the way); nothing was {what}"
            )),
            _ if e.kind() == std::io::ErrorKind::NotFound => {
                ToolError::Failed(format!("`{shown}` not found in the workspace"))
            }
            _ => ToolError::Failed(format!("cannot {what} `{shown}`: {e}")),
        }
    }
}

/// Whether `name` is one of tagloop's own configuration or secret files: `.env`, `.env.<any>`
/// or `tagloop.toml` (ASCII case ignored, for case-insensitive file systems). tagloop reads
/// these at start-up; a model that could read them would see the key, and one that could write
/// them could point the next run's key at its own server.
pub fn is_protected_name(name: &OsStr) -> bool {
    let lower = name.to_string_lossy().to_ascii_lowercase();
    lower == ".env" || lower.starts_with(".env.") || lower == "tagloop.toml"
}
