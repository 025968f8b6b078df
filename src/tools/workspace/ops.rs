//! What the tools do with a resolved path: open it for reading, write a file atomically, append,
//! make a folder, rename and delete. Every call goes through a directory handle of the root (see
//! the module docs), so a link swapped in after the decision fails the call instead of being
//! followed.

use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;

use super::{Workspace, sys};
use crate::tools::ToolError;

impl Workspace {
    /// Open a resolved path for reading through the root handle, following no link at all. The
    /// result is a regular file or a folder (anything else is refused; a FIFO cannot block
    /// because it is opened non-blocking).
    pub fn open_read(&self, path: &Path) -> Result<fs::File, ToolError> {
        self.open_read_meta(path).map(|(file, _)| file)
    }

    /// [`Workspace::open_read`], with the file's metadata (read from the open handle).
    pub fn open_read_meta(&self, path: &Path) -> Result<(fs::File, fs::Metadata), ToolError> {
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
        Ok((file, meta))
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
