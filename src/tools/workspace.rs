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
use std::ffi::{CString, OsStr, OsString};
use std::fs;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::ToolError;

/// How many symbolic links one path may pass through before it is refused (as Linux's `ELOOP`).
const MAX_SYMLINK_HOPS: usize = 40;

/// Why a workspace could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The root does not exist or cannot be canonicalised.
    #[error("workspace root {path}: {source}")]
    Root {
        /// The root as given.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The root exists but is not a directory.
    #[error("workspace root {0} is not a directory")]
    NotADirectory(PathBuf),
}

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

    /// The canonical root.
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
            let resolved = self.walk(user_path, &rel, access)?;
            self.check_kind(user_path, &resolved, access)?;
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

    /// Resolve `rel` from the root, following links component by component.
    fn walk(&self, user_path: &str, rel: &Path, access: Access) -> Result<PathBuf, ToolError> {
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
        while let Some(name) = pending.pop_front() {
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
                    let mut spliced: Vec<OsString> = Vec::new();
                    if target.is_absolute() {
                        let rest = target
                            .strip_prefix(&self.root)
                            .map_err(|_| Self::outside(user_path))?;
                        current = self.root.clone();
                        for c in rest.components() {
                            match c {
                                Component::Normal(n) => spliced.push(n.to_os_string()),
                                Component::ParentDir => spliced.push(OsString::from("..")),
                                _ => {}
                            }
                        }
                    } else {
                        for c in target.components() {
                            match c {
                                Component::Normal(n) => spliced.push(n.to_os_string()),
                                Component::ParentDir => spliced.push(OsString::from("..")),
                                Component::CurDir => {}
                                Component::RootDir | Component::Prefix(_) => {
                                    return Err(Self::outside(user_path));
                                }
                            }
                        }
                    }
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
                }
            }
        }
        // Defence in depth: whatever happened above, the result must be below the root.
        if !current.starts_with(&self.root) {
            return Err(Self::outside(user_path));
        }
        Ok(current)
    }

    /// Refuse device files, FIFOs, sockets.
    fn check_kind(&self, user_path: &str, path: &Path, access: Access) -> Result<(), ToolError> {
        match fs::symlink_metadata(path) {
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
                let dir = self.walk(user_path, parent, Access::Write)?;
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
                let resolved = self.walk(user_path, rel, Access::Read)?;
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

    /// Open a resolved path for reading through the root handle, following no link at all. The
    /// result is a regular file or a folder (anything else is refused; a FIFO cannot block
    /// because it is opened non-blocking).
    pub fn open_read(&self, path: &Path) -> Result<fs::File, ToolError> {
        let rel = self.rel(path)?;
        let fd = sys::open_beneath(
            &self.root_fd,
            rel,
            libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY,
            0,
        )
        .map_err(|e| self.io_err("read", path, e))?;
        let file = fs::File::from(fd);
        let meta = file.metadata().map_err(|e| self.io_err("read", path, e))?;
        if !(meta.is_file() || meta.is_dir()) {
            return Err(ToolError::Refused(format!(
                "`{}` is not a regular file or folder (device, FIFO or socket)",
                self.display(path)
            )));
        }
        Ok(file)
    }

    /// A handle on the parent folder of a resolved path and the last name, opened without
    /// following links; with `create`, missing folders are made (`mkdirat`) on the way.
    fn parent_dir(&self, path: &Path, create: bool) -> Result<(OwnedFd, OsString), ToolError> {
        let rel = self.rel(path)?;
        let name = rel
            .file_name()
            .ok_or_else(|| {
                ToolError::Refused(format!(
                    "`{}` is the workspace root itself",
                    self.display(path)
                ))
            })?
            .to_os_string();
        let parent = rel.parent().unwrap_or(Path::new(""));
        let fd = if create {
            sys::mkdir_beneath(&self.root_fd, parent)
        } else {
            sys::open_beneath(&self.root_fd, parent, libc::O_RDONLY | libc::O_DIRECTORY, 0)
        }
        .map_err(|e| self.io_err("changed in", path, e))?;
        Ok((fd, name))
    }

    /// Create a folder and its missing parents (`mkdirat`, one component at a time).
    pub fn make_dir(&self, path: &Path) -> Result<(), ToolError> {
        let rel = self.rel(path)?;
        sys::mkdir_beneath(&self.root_fd, rel)
            .map(drop)
            .map_err(|e| self.io_err("created", path, e))
    }

    /// Write `bytes` to `path` (already resolved) atomically: a temporary file in the same folder,
    /// then a rename, both relative to the parent folder's handle. Missing parent folders are
    /// created. A new file gets `0666 & !umask` like files other programs create; an existing
    /// file keeps its permissions.
    pub fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<(), ToolError> {
        let shown = self.display(path);
        let (dir, name) = self.parent_dir(path, true)?;
        let existing = sys::stat_at(&dir, &name).map_err(|e| self.io_err("written", path, e))?;
        let mode = match existing {
            Some(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => {
                return Err(ToolError::Failed(format!("`{shown}` is a folder")));
            }
            Some(st) if st.st_mode & libc::S_IFMT != libc::S_IFREG => {
                return Err(ToolError::Refused(format!(
                    "`{shown}` is not a regular file (it changed while it was being used); nothing was written"
                )));
            }
            Some(st) => Some(st.st_mode & 0o7777),
            None => None,
        };
        let fail = |e: std::io::Error| ToolError::Failed(format!("cannot write `{shown}`: {e}"));
        let (tmp_name, fd) = sys::create_temp(&dir).map_err(fail)?;
        let mut file = fs::File::from(fd);
        let written = file.write_all(bytes).and_then(|()| {
            if let Some(mode) = mode {
                // Keep an executable script executable (exactly its old mode, umask aside).
                sys::fchmod(&file, mode)?;
            }
            file.sync_all()
        });
        let renamed = written.and_then(|()| sys::rename_at(&dir, &tmp_name, &dir, &name, false));
        if let Err(e) = renamed {
            let _ = sys::unlink_at(&dir, &tmp_name, false);
            return Err(fail(e));
        }
        Ok(())
    }

    /// Append `bytes` to the end of a file without reading it (`O_APPEND`), creating the file
    /// and its parents when missing. Returns the file's new length.
    pub fn append(&self, path: &Path, bytes: &[u8]) -> Result<u64, ToolError> {
        let shown = self.display(path);
        let (dir, name) = self.parent_dir(path, true)?;
        let fd = sys::open_at(
            &dir,
            &name,
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_NONBLOCK | libc::O_NOCTTY,
            0o666,
        )
        .map_err(|e| self.io_err("written", path, e))?;
        let mut file = fs::File::from(fd);
        let fail =
            |e: std::io::Error| ToolError::Failed(format!("cannot append to `{shown}`: {e}"));
        if !file.metadata().map_err(fail)?.is_file() {
            return Err(ToolError::Refused(format!(
                "`{shown}` is not a regular file"
            )));
        }
        file.write_all(bytes).map_err(fail)?;
        Ok(file.metadata().map_err(fail)?.len())
    }

    /// Move an entry (not following a link at either end) to a name that must not exist yet;
    /// missing parents of the target are created.
    pub fn rename(&self, from: &Path, to: &Path) -> Result<(), ToolError> {
        let (src_dir, src_name) = self.parent_dir(from, false)?;
        let (dst_dir, dst_name) = self.parent_dir(to, true)?;
        sys::rename_at(&src_dir, &src_name, &dst_dir, &dst_name, true).map_err(|e| {
            ToolError::Failed(format!(
                "cannot move `{}` to `{}`: {e}",
                self.display(from),
                self.display(to)
            ))
        })
    }

    /// Delete an entry: a file or a link (never its target) with `unlinkat`, a folder with
    /// everything in it, walking it through handles (links inside are removed, not followed).
    pub fn remove(&self, path: &Path) -> Result<(), ToolError> {
        let (dir, name) = self.parent_dir(path, false)?;
        sys::remove_tree_at(&dir, &name).map_err(|e| self.io_err("deleted", path, e))
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

/// Thin, checked wrappers over the `*at` system calls. Every name passed in is one path
/// component; every open adds `O_NOFOLLOW | O_CLOEXEC`.
mod sys {
    use super::*;

    fn cstr(name: &OsStr) -> std::io::Result<CString> {
        CString::new(name.as_bytes()).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
    }

    fn check(r: libc::c_int) -> std::io::Result<libc::c_int> {
        if r < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(r)
        }
    }

    /// The root folder itself, by its canonical path (once, when the workspace is made).
    pub(super) fn open_dir_path(path: &Path) -> std::io::Result<OwnedFd> {
        let c = cstr(path.as_os_str())?;
        // SAFETY: `c` is a valid NUL-terminated string; the result is checked.
        let fd = check(unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        })?;
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// `openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)` for one component.
    pub(super) fn open_at(
        dir: &OwnedFd,
        name: &OsStr,
        flags: libc::c_int,
        mode: libc::mode_t,
    ) -> std::io::Result<OwnedFd> {
        let c = cstr(name)?;
        // SAFETY: valid fd and NUL-terminated name; the result is checked.
        let fd = check(unsafe {
            libc::openat(
                dir.as_raw_fd(),
                c.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                libc::c_uint::from(mode),
            )
        })?;
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// One folder component, never a link: a link there is `ELOOP` (the kernel says `ENOTDIR`
    /// for `O_DIRECTORY | O_NOFOLLOW` on a link, which would read as "not a folder").
    fn open_dir_at(dir: &OwnedFd, name: &OsStr) -> std::io::Result<OwnedFd> {
        open_at(dir, name, libc::O_RDONLY | libc::O_DIRECTORY, 0).map_err(|e| {
            let is_link = e.raw_os_error() == Some(libc::ENOTDIR)
                && stat_at(dir, name)
                    .ok()
                    .flatten()
                    .is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK);
            if is_link {
                std::io::Error::from_raw_os_error(libc::ELOOP)
            } else {
                e
            }
        })
    }

    fn dup(fd: &OwnedFd) -> std::io::Result<OwnedFd> {
        fd.try_clone()
    }

    /// The names of a relative, link-free path (resolved paths have nothing else).
    fn names(rel: &Path) -> std::io::Result<Vec<&OsStr>> {
        rel.components()
            .filter(|c| *c != Component::CurDir)
            .map(|c| match c {
                Component::Normal(n) => Ok(n),
                _ => Err(std::io::Error::from_raw_os_error(libc::EXDEV)),
            })
            .collect()
    }

    /// Set once `openat2` turned out to be missing (Linux < 5.6) or filtered (a seccomp policy
    /// answering `EPERM`); from then on the component walk is used.
    pub(super) static OPENAT2_MISSING: AtomicBool = AtomicBool::new(false);

    #[cfg(target_os = "linux")]
    fn openat2(
        root: &OwnedFd,
        rel: &Path,
        flags: libc::c_int,
        mode: libc::mode_t,
    ) -> Option<std::io::Result<OwnedFd>> {
        if OPENAT2_MISSING.load(Ordering::Relaxed) {
            return None;
        }
        let path = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        let c = match cstr(path.as_os_str()) {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        // SAFETY: `open_how` is plain old data; zeroed is a valid value.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = (flags | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64;
        how.mode = u64::from(mode);
        how.resolve =
            libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
        // SAFETY: valid fd, NUL-terminated path, `how` outlives the call and its size is passed.
        let r = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                root.as_raw_fd(),
                c.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) {
                OPENAT2_MISSING.store(true, Ordering::Relaxed);
                return None;
            }
            return Some(Err(e));
        }
        // SAFETY: `r` is a fresh descriptor we own.
        Some(Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) }))
    }

    #[cfg(not(target_os = "linux"))]
    fn openat2(
        _: &OwnedFd,
        _: &Path,
        _: libc::c_int,
        _: libc::mode_t,
    ) -> Option<std::io::Result<OwnedFd>> {
        None
    }

    /// Open `rel` below `root` following no link: `openat2` when the kernel has it, else one
    /// component at a time with `O_NOFOLLOW` (folders with `O_DIRECTORY`).
    pub(super) fn open_beneath(
        root: &OwnedFd,
        rel: &Path,
        flags: libc::c_int,
        mode: libc::mode_t,
    ) -> std::io::Result<OwnedFd> {
        if let Some(r) = openat2(root, rel, flags, mode) {
            return r;
        }
        let names = names(rel)?;
        let Some((last, dirs)) = names.split_last() else {
            return open_at(root, OsStr::new("."), flags, mode);
        };
        let mut cur = dup(root)?;
        for name in dirs {
            cur = open_dir_at(&cur, name)?;
        }
        open_at(&cur, last, flags, mode)
    }

    /// Open the folder `rel` below `root`, creating each missing component with `mkdirat`
    /// (mode `0777 & !umask`), never following a link.
    pub(super) fn mkdir_beneath(root: &OwnedFd, rel: &Path) -> std::io::Result<OwnedFd> {
        let mut cur = dup(root)?;
        for name in names(rel)? {
            let c = cstr(name)?;
            // SAFETY: valid fd and NUL-terminated name; the result is checked below.
            let r = unsafe { libc::mkdirat(cur.as_raw_fd(), c.as_ptr(), 0o777) };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(e);
                }
            }
            cur = open_dir_at(&cur, name)?;
        }
        Ok(cur)
    }

    /// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`; `None` when the name does not exist.
    pub(super) fn stat_at(dir: &OwnedFd, name: &OsStr) -> std::io::Result<Option<libc::stat>> {
        let c = cstr(name)?;
        // SAFETY: `stat` is plain old data.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid fd, NUL-terminated name, `st` is writable.
        let r = unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            return if e.kind() == std::io::ErrorKind::NotFound {
                Ok(None)
            } else {
                Err(e)
            };
        }
        Ok(Some(st))
    }

    pub(super) fn fchmod(file: &fs::File, mode: libc::mode_t) -> std::io::Result<()> {
        // SAFETY: valid fd.
        check(unsafe { libc::fchmod(file.as_raw_fd(), mode) }).map(drop)
    }

    /// A new, empty temporary file `.tagloop-*.tmp` in `dir` (mode `0666 & !umask`).
    pub(super) fn create_temp(dir: &OwnedFd) -> std::io::Result<(OsString, OwnedFd)> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let mut last = std::io::Error::from_raw_os_error(libc::EEXIST);
        for _ in 0..16 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let name = OsString::from(format!(
                ".tagloop-{}-{}-{nanos:x}.tmp",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            match open_at(
                dir,
                &name,
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
                0o666,
            ) {
                Ok(fd) => return Ok((name, fd)),
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// `renameat` between two folder handles; with `no_replace`, an existing target is an error
    /// (`renameat2(RENAME_NOREPLACE)` on Linux, a check just before elsewhere).
    pub(super) fn rename_at(
        from_dir: &OwnedFd,
        from: &OsStr,
        to_dir: &OwnedFd,
        to: &OsStr,
        no_replace: bool,
    ) -> std::io::Result<()> {
        let (f, t) = (cstr(from)?, cstr(to)?);
        #[cfg(target_os = "linux")]
        if no_replace {
            // SAFETY: valid fds and NUL-terminated names; the result is checked.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_renameat2,
                    from_dir.as_raw_fd(),
                    f.as_ptr(),
                    to_dir.as_raw_fd(),
                    t.as_ptr(),
                    libc::RENAME_NOREPLACE,
                )
            };
            if r == 0 {
                return Ok(());
            }
            let e = std::io::Error::last_os_error();
            if !matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EINVAL)) {
                return Err(e);
            }
        }
        if no_replace && stat_at(to_dir, to)?.is_some() {
            return Err(std::io::Error::from_raw_os_error(libc::EEXIST));
        }
        // SAFETY: valid fds and NUL-terminated names.
        check(unsafe {
            libc::renameat(
                from_dir.as_raw_fd(),
                f.as_ptr(),
                to_dir.as_raw_fd(),
                t.as_ptr(),
            )
        })
        .map(drop)
    }

    pub(super) fn unlink_at(dir: &OwnedFd, name: &OsStr, is_dir: bool) -> std::io::Result<()> {
        let c = cstr(name)?;
        let flags = if is_dir { libc::AT_REMOVEDIR } else { 0 };
        // SAFETY: valid fd and NUL-terminated name.
        check(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), flags) }).map(drop)
    }

    /// Delete `name` in `dir`; a folder is emptied first through its own handle (opened with
    /// `O_NOFOLLOW`), so no link inside it is ever followed.
    pub(super) fn remove_tree_at(dir: &OwnedFd, name: &OsStr) -> std::io::Result<()> {
        let st = stat_at(dir, name)?
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))?;
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return unlink_at(dir, name, false);
        }
        let sub = open_at(dir, name, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        for entry in read_dir_names(&sub)? {
            remove_tree_at(&sub, &entry)?;
        }
        unlink_at(dir, name, true)
    }

    /// The entry names of a folder handle (`fdopendir` on a duplicate, so `sub` stays usable).
    fn read_dir_names(dir: &OwnedFd) -> std::io::Result<Vec<OsString>> {
        let fd = dup(dir)?;
        // SAFETY: `fdopendir` takes ownership of the duplicate on success.
        let stream = unsafe { libc::fdopendir(fd.as_raw_fd()) };
        if stream.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        std::mem::forget(fd);
        let mut names = Vec::new();
        loop {
            // SAFETY: `stream` is a valid open directory stream.
            let ent = unsafe { libc::readdir(stream) };
            if ent.is_null() {
                break;
            }
            // SAFETY: `d_name` is a NUL-terminated array inside the entry.
            let name = unsafe { std::ffi::CStr::from_ptr((*ent).d_name.as_ptr()) };
            let bytes = name.to_bytes();
            if bytes != b"." && bytes != b".." {
                names.push(OsStr::from_bytes(bytes).to_os_string());
            }
        }
        // SAFETY: closes the stream and the duplicate it owns.
        unsafe { libc::closedir(stream) };
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways of opening beneath the root (openat2, and the component walk used where it is
    /// missing) follow no link, in the middle or at the end.
    #[test]
    fn open_beneath_follows_no_link_either_way() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        fs::create_dir_all(root.join("a/b")).expect("mkdir");
        fs::write(root.join("a/b/f"), "x").expect("write");
        std::os::unix::fs::symlink("a", root.join("link_dir")).expect("link");
        std::os::unix::fs::symlink("a/b/f", root.join("link_file")).expect("link");
        let fd = sys::open_dir_path(root).expect("root");
        for walk in [false, true] {
            if walk {
                sys::OPENAT2_MISSING.store(true, Ordering::Relaxed);
            }
            let ok = sys::open_beneath(&fd, Path::new("a/b/f"), libc::O_RDONLY, 0);
            assert!(ok.is_ok(), "walk={walk}: {ok:?}");
            for bad in ["link_dir/b/f", "link_file"] {
                let e = sys::open_beneath(&fd, Path::new(bad), libc::O_RDONLY, 0)
                    .expect_err("a link must not be followed");
                assert_eq!(
                    e.raw_os_error(),
                    Some(libc::ELOOP),
                    "walk={walk} {bad}: {e}"
                );
            }
            let e = sys::open_beneath(&fd, Path::new("../x"), libc::O_RDONLY, 0)
                .expect_err("`..` must not be accepted");
            assert!(
                matches!(e.raw_os_error(), Some(libc::EXDEV) | Some(libc::ENOENT)),
                "walk={walk}: {e}"
            );
        }
    }

    #[test]
    fn protected_names() {
        for n in [".env", ".ENV", ".env.local", "tagloop.toml", "TagLoop.TOML"] {
            assert!(is_protected_name(OsStr::new(n)), "{n}");
        }
        for n in [".envrc", "env", "tagloop.toml.bak", "my.env", "x.toml"] {
            assert!(!is_protected_name(OsStr::new(n)), "{n}");
        }
    }
}
