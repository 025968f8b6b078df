//! Thin, checked wrappers over the `*at` system calls. Every name passed in is one path
//! component; every open adds `O_NOFOLLOW | O_CLOEXEC`.

use std::ffi::{CString, OsStr, OsString};
use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
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
    let st =
        stat_at(dir, name)?.ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))?;
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
