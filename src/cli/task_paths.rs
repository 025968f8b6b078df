//! Paths a task file names (an eval suite's `workspace` and `role`, a batch input's `role`), and
//! the copy of an eval workspace.
//!
//! A task file is often someone else's (a shared suite, a downloaded benchmark), so what it names
//! must stay inside its own folder: a path is resolved against the folder, symlinks included
//! (both sides canonicalised), and must still lie under it. `/`, `../elsewhere`, an absolute path
//! or a link to a folder outside are refused, and the caller names the line.
//!
//! A workspace is copied fresh for each run, so it is bounded: no file over
//! [`MAX_WORKSPACE_FILE`] (a 3 GB sparse file would otherwise be written out dense), at most
//! [`MAX_WORKSPACE_BYTES`] in all and [`MAX_WORKSPACE_ENTRIES`] files and folders. Symbolic links
//! inside it are not copied (a link followed during the copy could bring in any file the user
//! can read, and a link copied as a link could point out of the copy), nor are FIFOs, sockets
//! and devices: a fixture is plain files and folders.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use tagloop::text::byte_size;

/// Largest file a workspace may hold: 64 MiB.
pub const MAX_WORKSPACE_FILE: u64 = 64 << 20;

/// Largest total size of a workspace's files: 512 MiB.
pub const MAX_WORKSPACE_BYTES: u64 = 512 << 20;

/// Most files and folders a workspace may hold.
pub const MAX_WORKSPACE_ENTRIES: usize = 100_000;

/// Largest role file read: 1 MiB (a role is a name, instructions and a schema).
pub const MAX_ROLE_FILE: u64 = 1 << 20;

/// The folder of a task file, which every path the file names must stay inside.
pub struct TaskFolder {
    /// The folder, canonical (absolute, no symlinks, no `..`).
    root: PathBuf,
    /// How errors name it: "the suite's folder".
    name: &'static str,
}

impl TaskFolder {
    /// The folder holding `task_file`; `name` is how errors call it ("the suite's folder").
    pub fn of(task_file: &Path, name: &'static str) -> Result<Self> {
        let parent = match task_file.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let root = parent
            .canonicalize()
            .with_context(|| format!("cannot resolve the folder of {}", task_file.display()))?;
        Ok(TaskFolder { root, name })
    }

    /// `path` as written in the task file, resolved against the folder: canonical, and inside it.
    /// `what` names the field in errors ("workspace", "role file").
    pub fn resolve(&self, what: &str, path: &Path) -> Result<PathBuf> {
        // Joining an absolute path gives that path: it is then checked like any other.
        let full = self
            .root
            .join(path)
            .canonicalize()
            .with_context(|| format!("{what} {} cannot be found", path.display()))?;
        if !full.starts_with(&self.root) {
            bail!(
                "{what} {} is outside {} ({}): a task file may only name what is beside it",
                path.display(),
                self.name,
                self.root.display()
            );
        }
        Ok(full)
    }

    /// A workspace folder the task file names: inside the folder, and within the bounds.
    pub fn workspace(&self, path: &Path) -> Result<PathBuf> {
        let dir = self.resolve("workspace", path)?;
        if !dir.is_dir() {
            bail!("workspace {} is not a folder", path.display());
        }
        survey(&dir).with_context(|| format!("workspace {}", path.display()))?;
        Ok(dir)
    }

    /// A role file the task file names: inside the folder, a regular file, at most
    /// [`MAX_ROLE_FILE`] bytes.
    pub fn role_file(&self, path: &Path) -> Result<PathBuf> {
        let file = self.resolve("role file", path)?;
        let meta =
            std::fs::metadata(&file).with_context(|| format!("role file {}", path.display()))?;
        if !meta.is_file() {
            bail!("role file {} is not a regular file", path.display());
        }
        if meta.len() > MAX_ROLE_FILE {
            bail!(
                "role file {} is {}, over the {} a role file may be",
                path.display(),
                byte_size(meta.len()),
                byte_size(MAX_ROLE_FILE)
            );
        }
        Ok(file)
    }
}

/// What a workspace copy holds, relative to the workspace: folders before what is in them.
struct Survey {
    dirs: Vec<PathBuf>,
    files: Vec<PathBuf>,
}

/// List what a copy of `dir` holds, checking the bounds: an error names the file.
fn survey(dir: &Path) -> Result<Survey> {
    let mut out = Survey {
        dirs: Vec::new(),
        files: Vec::new(),
    };
    let mut total = 0u64;
    // `ignore`'s walker with every filter off is a plain depth-first walk that does not follow
    // links (the entries' types come from `lstat`), and has no recursion of ours to bound.
    let walk = ignore::WalkBuilder::new(dir)
        .standard_filters(false)
        .follow_links(false)
        .build();
    for entry in walk {
        let entry = entry?;
        if entry.depth() == 0 {
            continue;
        }
        let rel = entry.path().strip_prefix(dir)?.to_path_buf();
        let Some(kind) = entry.file_type() else {
            continue;
        };
        if out.dirs.len() + out.files.len() >= MAX_WORKSPACE_ENTRIES {
            bail!("holds more than {MAX_WORKSPACE_ENTRIES} files and folders");
        }
        if kind.is_dir() {
            out.dirs.push(rel);
        } else if kind.is_file() {
            let len = entry.metadata()?.len();
            if len > MAX_WORKSPACE_FILE {
                bail!(
                    "file {} is {}, over the {} a workspace file may be",
                    rel.display(),
                    byte_size(len),
                    byte_size(MAX_WORKSPACE_FILE)
                );
            }
            total += len;
            if total > MAX_WORKSPACE_BYTES {
                bail!(
                    "holds more than {} of files (at {})",
                    byte_size(MAX_WORKSPACE_BYTES),
                    rel.display()
                );
            }
            out.files.push(rel);
        } else {
            tracing::warn!(path = %entry.path().display(), "not a file or a folder: not copied");
        }
    }
    Ok(out)
}

/// Copy the workspace `src` into the empty folder `dst`, within the bounds (checked again: the
/// files may have changed since the suite was read).
pub fn copy_workspace(src: &Path, dst: &Path) -> Result<()> {
    let survey = survey(src)?;
    for d in &survey.dirs {
        std::fs::create_dir(dst.join(d))
            .with_context(|| format!("cannot create {}", d.display()))?;
    }
    for f in &survey.files {
        copy_file(&src.join(f), &dst.join(f))
            .with_context(|| format!("cannot copy {}", f.display()))?;
    }
    Ok(())
}

/// A fresh, empty folder for one run of a task, removed when dropped: a random temporary one,
/// or with `tagloop eval --scratch DIR` the folder [`scratch_name`] names in DIR, the same path
/// every time. The prompt names the workspace, so a random name changes what the model reads
/// from one run to the next; a fixed one lets a run at temperature 0 repeat exactly, and a
/// caching proxy answer what an earlier run asked.
pub fn fresh_workspace(scratch: Option<&Path>, id: &str, run: u32) -> Result<tempfile::TempDir> {
    let Some(root) = scratch else {
        return Ok(tempfile::Builder::new().prefix("tagloop-eval-").tempdir()?);
    };
    let name = scratch_name(id, run);
    std::fs::create_dir_all(root)
        .with_context(|| format!("cannot create the scratch folder {}", root.display()))?;
    tempfile::Builder::new()
        .prefix(&name)
        .rand_bytes(0)
        .tempdir_in(root)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => anyhow::anyhow!(
                "{} is there already: another eval uses the same --scratch folder",
                root.join(&name).display()
            ),
            _ => {
                anyhow::Error::new(e).context(format!("cannot make {}", root.join(&name).display()))
            }
        })
}

/// The folder of one run of a task under `--scratch`: `task-` and the first 12 hex digits of
/// the id's SHA-256, then `.RUN` for the repeats after the first. Neutral (the prompt names the
/// folder, and an id such as `ledger-lamps-total` would tell the model about its task), the
/// same for the same id, short, and safe whatever the id holds.
pub fn scratch_name(id: &str, run: u32) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(id.as_bytes());
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    match run {
        0 | 1 => format!("task-{hex}"),
        n => format!("task-{hex}.{n}"),
    }
}

/// Before anything runs under `--scratch DIR`: the folders the runs would make that are there
/// already (left by an eval that was killed, or another eval's on the same DIR). The command
/// stops naming them rather than failing those runs one by one.
pub fn scratch_in_use(root: &Path, runs: &[(&str, u32)]) -> Vec<PathBuf> {
    runs.iter()
        .map(|(id, run)| root.join(scratch_name(id, *run)))
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect()
}

/// Copy one regular file, reading at most [`MAX_WORKSPACE_FILE`] bytes of it.
///
/// It is opened without following a link and without blocking (a FIFO put in its place since the
/// survey cannot hang the copy), and its type is checked on the open handle.
fn copy_file(from: &Path, to: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(from)?;
    if !file.metadata()?.is_file() {
        bail!("not a regular file any more");
    }
    let mut out = File::create_new(to)?;
    let copied = std::io::copy(&mut file.take(MAX_WORKSPACE_FILE + 1), &mut out)?;
    if copied > MAX_WORKSPACE_FILE {
        bail!("grew over {}", byte_size(MAX_WORKSPACE_FILE));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_names_are_neutral_distinct_and_safe_whatever_the_id() {
        let ids = [
            "",
            ".",
            "..",
            "a/b",
            "a_b",
            "a b",
            "Eq",
            "eq",
            &"x".repeat(300),
        ];
        let names: Vec<String> = ids.iter().map(|id| scratch_name(id, 1)).collect();
        for n in &names {
            assert!(n.starts_with("task-") && n.len() == 17, "{n}");
            assert!(n[5..].chars().all(|c| c.is_ascii_hexdigit()), "{n}");
        }
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
        assert_eq!(scratch_name("eq", 1), scratch_name("eq", 1));
        assert_eq!(
            scratch_name("eq", 3),
            format!("{}.3", scratch_name("eq", 1))
        );
    }

    #[test]
    fn a_scratch_folder_is_made_fresh_and_one_already_there_is_named() {
        let root = tempfile::tempdir().unwrap();
        let dir = fresh_workspace(Some(root.path()), "t", 1).unwrap();
        assert_eq!(dir.path(), root.path().join(scratch_name("t", 1)));
        assert_eq!(
            scratch_in_use(root.path(), &[("t", 1), ("u", 1)]),
            vec![dir.path().to_path_buf()]
        );
        let err = fresh_workspace(Some(root.path()), "t", 1).unwrap_err();
        assert!(
            format!("{err:#}").contains("another eval uses the same --scratch"),
            "{err:#}"
        );
        drop(dir);
        assert!(scratch_in_use(root.path(), &[("t", 1)]).is_empty());
    }

    #[test]
    fn paths_resolve_inside_the_folder_only() {
        let lab = tempfile::tempdir().unwrap();
        let root = lab.path().join("suite");
        std::fs::create_dir_all(root.join("ws/sub")).unwrap();
        std::fs::create_dir_all(lab.path().join("out")).unwrap();
        std::os::unix::fs::symlink(lab.path().join("out"), root.join("link")).unwrap();
        let folder = TaskFolder::of(&root.join("suite.jsonl"), "the suite's folder").unwrap();
        assert!(folder.resolve("w", Path::new("ws")).is_ok());
        assert!(folder.resolve("w", Path::new("ws/sub/..")).is_ok());
        assert!(folder.resolve("w", Path::new(".")).is_ok());
        for bad in ["..", "../out", "link", "/", "ws/../../out"] {
            let err = format!("{:#}", folder.resolve("w", Path::new(bad)).unwrap_err());
            assert!(err.contains("outside the suite's folder"), "{bad}: {err}");
        }
        let abs = lab.path().join("out");
        assert!(folder.resolve("w", &abs).is_err());
        assert!(folder.resolve("w", Path::new("missing")).is_err());
    }

    #[test]
    fn a_copy_skips_links_and_keeps_files_and_folders() {
        let lab = tempfile::tempdir().unwrap();
        let src = lab.path().join("src");
        std::fs::create_dir_all(src.join("a/b")).unwrap();
        std::fs::write(src.join("a/b/f.txt"), "f").unwrap();
        std::fs::write(lab.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(lab.path().join("secret"), src.join("a/leak")).unwrap();
        std::os::unix::fs::symlink(lab.path(), src.join("up")).unwrap();
        let dst = lab.path().join("dst");
        std::fs::create_dir(&dst).unwrap();
        copy_workspace(&src, &dst).unwrap();
        assert_eq!(std::fs::read_to_string(dst.join("a/b/f.txt")).unwrap(), "f");
        assert!(std::fs::symlink_metadata(dst.join("a/leak")).is_err());
        assert!(std::fs::symlink_metadata(dst.join("up")).is_err());
    }

    #[test]
    fn a_file_over_the_bound_is_refused_by_name() {
        let lab = tempfile::tempdir().unwrap();
        let f = File::create(lab.path().join("big")).unwrap();
        f.set_len(MAX_WORKSPACE_FILE + 1).unwrap();
        let err = format!("{:#}", survey(lab.path()).err().unwrap());
        assert!(
            err.contains("file big is 67108865 bytes, over the 64 MiB"),
            "{err}"
        );
        f.set_len(MAX_WORKSPACE_FILE).unwrap();
        assert!(survey(lab.path()).is_ok());
    }

    #[test]
    fn sizes_read_as_the_library_says_them() {
        // The crate's one byte_size: a whole number of KiB reads in KiB, here as everywhere.
        let lab = tempfile::tempdir().unwrap();
        let role = lab.path().join("role.md");
        File::create(&role)
            .unwrap()
            .set_len(MAX_ROLE_FILE + 1024)
            .unwrap();
        let folder = TaskFolder::of(&lab.path().join("suite.jsonl"), "the suite's folder").unwrap();
        let err = format!("{:#}", folder.role_file(Path::new("role.md")).unwrap_err());
        assert!(
            err.contains("is 1025 KiB, over the 1 MiB a role file may be"),
            "{err}"
        );
    }
}
