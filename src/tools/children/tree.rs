//! A child's lifetime: tagloop as the subreaper of its descendants, jobs, whole-tree kills and
//! orphan reaping (rule 2 of the [module docs](super)).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::env::JOB_VAR;

static HARDENED: AtomicBool = AtomicBool::new(false);
static NEXT_JOB: AtomicU64 = AtomicU64::new(1);

/// Process state shared by every spawn: the pids tagloop spawned itself (their exit statuses
/// belong to tokio) and the jobs still running.
#[derive(Default)]
struct Registry {
    own: HashSet<u32>,
    active_jobs: HashSet<String>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

struct Locked(MutexGuard<'static, Option<Registry>>);

impl Locked {
    fn get(&mut self) -> &mut Registry {
        self.0.get_or_insert_with(Registry::default)
    }
}

fn lock() -> Locked {
    Locked(REGISTRY.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Make this process undumpable and the subreaper of its descendants (Linux; elsewhere it does
/// nothing). Call it once, early, in a program that starts children on a model's behalf. Returns
/// the first error the kernel gave.
///
/// It also opts the process into orphan handling: from then on every direct child that was not
/// spawned through a `Job` counts as an orphan of tagloop's commands, and is reaped or killed
/// when a command ends. A program that spawns children of its own should not call it.
pub fn harden_process() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with these options only changes flags of the calling process.
        let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: as above.
        let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        HARDENED.store(true, Ordering::SeqCst);
    }
    Ok(())
}

/// Whether [`harden_process`] succeeded in this process.
pub fn is_hardened() -> bool {
    HARDENED.load(Ordering::SeqCst)
}

/// One command or server and everything it starts. While a job lives, orphans marked with its id
/// are left alone by other jobs' clean-ups; dropping it kills them.
#[derive(Debug)]
pub struct Job {
    id: String,
}

impl Job {
    /// A new job with a fresh id; `kind` is a readable prefix (`cmd`, `mcp`).
    pub fn new(kind: &str) -> Job {
        let id = format!(
            "{}-{}-{}",
            kind,
            std::process::id(),
            NEXT_JOB.fetch_add(1, Ordering::SeqCst)
        );
        lock().get().active_jobs.insert(id.clone());
        Job { id }
    }

    /// Spawn a child of this job: the command gets the job marker and (Linux) the parent-death
    /// signal, then `spawn` starts it and returns the child's pid. The registry is locked meanwhile,
    /// so the orphan reaper never mistakes a fresh child for an orphan.
    pub fn spawn<T>(
        &self,
        mut cmd: tokio::process::Command,
        spawn: impl FnOnce(tokio::process::Command) -> std::io::Result<(T, Option<u32>)>,
    ) -> std::io::Result<T> {
        cmd.env(JOB_VAR, &self.id);
        #[cfg(target_os = "linux")]
        {
            let parent = std::process::id();
            // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
            // calls (prctl, getppid).
            unsafe {
                cmd.pre_exec(move || {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // The parent died before the prctl took effect: do not run at all.
                    if u32::try_from(libc::getppid()).ok() != Some(parent) {
                        return Err(std::io::Error::other("tagloop exited"));
                    }
                    Ok(())
                });
            }
        }
        let mut reg = lock();
        let (value, pid) = spawn(cmd)?;
        if let Some(pid) = pid {
            reg.get().own.insert(pid);
        }
        Ok(value)
    }

    /// Kill every orphan of this job that was re-parented to tagloop (and its whole tree).
    pub fn sweep(&self) {
        sweep_orphans(Some(&self.id));
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        lock().get().active_jobs.remove(&self.id);
        sweep_orphans(Some(&self.id));
    }
}

/// Forget a pid tagloop spawned, once tokio has waited for it.
pub fn forget(pid: u32) {
    lock().get().own.remove(&pid);
}

/// Whether this process has no child at all, running or exited (Linux; elsewhere: unknown, so
/// `false`). Every descendant tagloop could have to kill or reap is either a child of its own or
/// the descendant of one (orphans are re-parented to tagloop, the subreaper), so with no child
/// the `/proc` walk below has nothing to find. That walk opens `/proc/PID/stat` of every process
/// on the machine (a hundred or more), and it ran at every exit and after every command; now it
/// runs only when there is a child. `waitid` with `WNOWAIT` reaps nothing: the exit statuses
/// tokio waits for are left where they are.
fn no_children() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: an all-zero siginfo_t is a valid value for waitid to fill in.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid writes only into `info`; WNOHANG makes it return at once and WNOWAIT
        // leaves any exited child waitable.
        let rc = unsafe {
            libc::waitid(
                libc::P_ALL,
                0,
                &mut info,
                libc::WEXITED | libc::WSTOPPED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD)
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// A snapshot of the process table: pid → (parent pid, state letter).
fn process_table() -> HashMap<u32, (u32, char)> {
    let mut table = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return table;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(row) = read_stat(pid) {
            table.insert(pid, row);
        }
    }
    table
}

/// The parent pid and state of `pid` from `/proc/PID/stat` (the command name may hold spaces and
/// parentheses, so the fields are read after the last `)`).
fn read_stat(pid: u32) -> Option<(u32, char)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((ppid, state))
}

/// `roots` and all their descendants in `table`.
fn tree(table: &HashMap<u32, (u32, char)>, roots: &[u32]) -> HashSet<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (pid, (ppid, _)) in table {
        children.entry(*ppid).or_default().push(*pid);
    }
    let mut seen = HashSet::new();
    let mut todo: Vec<u32> = roots
        .iter()
        .copied()
        .filter(|p| table.contains_key(p))
        .collect();
    while let Some(p) = todo.pop() {
        if seen.insert(p)
            && let Some(kids) = children.get(&p)
        {
            todo.extend(kids);
        }
    }
    seen
}

fn signal(pid: u32, sig: i32) {
    let me = std::process::id();
    if pid <= 1 || pid == me {
        return;
    }
    if let Ok(p) = i32::try_from(pid) {
        // SAFETY: kill only sends a signal to a process we found among our descendants.
        unsafe { libc::kill(p, sig) };
    }
}

/// Kill `roots` and every descendant they have: stop them all first (so none forks or is
/// re-parented while the tree is collected), then `SIGKILL` them. Never signals tagloop itself.
pub fn kill_tree(roots: &[u32]) {
    let mut stopped: HashSet<u32> = HashSet::new();
    for _ in 0..64 {
        let table = process_table();
        let mut all: Vec<u32> = roots.to_vec();
        all.extend(stopped.iter().copied());
        let fresh: Vec<u32> = tree(&table, &all)
            .into_iter()
            .filter(|p| !stopped.contains(p) && table.get(p).is_some_and(|(_, s)| *s != 'Z'))
            .collect();
        if fresh.is_empty() {
            break;
        }
        for p in fresh {
            signal(p, libc::SIGSTOP);
            stopped.insert(p);
        }
    }
    for p in &stopped {
        signal(*p, libc::SIGKILL);
    }
    if !stopped.is_empty() {
        tracing::debug!(count = stopped.len(), "killed a process tree");
    }
}

/// The job marker in a process's environment, if it can be read.
fn job_of(pid: u32) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{JOB_VAR}=");
    env.split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(prefix.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// Handle the direct children of tagloop that it did not spawn itself (orphans re-parented to the
/// subreaper): reap the dead ones; kill (with their trees) the live ones of `job`, and those
/// that carry no marker of a job still running. `None` only reaps.
fn sweep_orphans(job: Option<&str>) {
    // Without the subreaper, a direct child tagloop did not spawn through a [`Job`] belongs to the
    // program embedding tagloop: never touch it.
    if !cfg!(target_os = "linux") || !is_hardened() {
        return;
    }
    if no_children() {
        return;
    }
    let me = std::process::id();
    let mut reg = lock();
    let table = process_table();
    let mut doomed = Vec::new();
    for (pid, (ppid, state)) in &table {
        if *ppid != me || reg.get().own.contains(pid) {
            continue;
        }
        if *state == 'Z' {
            reap(*pid);
            continue;
        }
        let Some(job) = job else { continue };
        match job_of(*pid) {
            Some(j) if j == job => doomed.push(*pid),
            Some(j) if reg.get().active_jobs.contains(&j) => {}
            _ => doomed.push(*pid),
        }
    }
    drop(reg);
    if !doomed.is_empty() {
        tracing::debug!(?doomed, "killing orphans left by a finished command");
        kill_tree(&doomed);
        reap_orphans();
    }
}

fn reap(pid: u32) {
    if let Ok(p) = i32::try_from(pid) {
        let mut status = 0;
        // SAFETY: waitpid on one specific child that no one else waits for (not in `own`).
        unsafe { libc::waitpid(p, &mut status, libc::WNOHANG) };
    }
}

/// Reap orphans re-parented to tagloop that have exited (never a child tokio waits for).
pub fn reap_orphans() {
    sweep_orphans(None);
}

/// Kill every descendant tagloop still has (at exit, on a fatal signal). Safe to call more than
/// once.
pub fn kill_all_descendants() {
    if !cfg!(target_os = "linux") || no_children() {
        return;
    }
    let me = std::process::id();
    let table = process_table();
    let direct: Vec<u32> = table
        .iter()
        .filter(|(_, (ppid, _))| *ppid == me)
        .map(|(pid, _)| *pid)
        .collect();
    if !direct.is_empty() {
        kill_tree(&direct);
    }
}

/// Reap orphans whenever a child exits (a tokio task on `SIGCHLD`; tokio's own children are left
/// to tokio). Call it inside a runtime after [`harden_process`].
pub fn spawn_orphan_reaper() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::child()) {
            Ok(mut sig) => {
                tokio::spawn(async move {
                    while sig.recv().await.is_some() {
                        // /proc scanning is blocking work, but short.
                        let _ = tokio::task::spawn_blocking(reap_orphans).await;
                    }
                });
            }
            Err(e) => tracing::warn!("cannot watch SIGCHLD to reap orphans: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_follows_parents() {
        let table: HashMap<u32, (u32, char)> = [
            (10, (1, 'S')),
            (11, (10, 'S')),
            (12, (11, 'S')),
            (20, (1, 'S')),
        ]
        .into_iter()
        .collect();
        let t = tree(&table, &[10]);
        assert_eq!(t, [10, 11, 12].into_iter().collect());
    }

    /// A child of ours, running or exited and not yet waited for, is seen (so the `/proc` walk
    /// runs), and looking reaps nothing. (The "no child" case is not asserted here: other tests
    /// of this binary may have children at the same moment. BENCHMARKS.md's strace counts show
    /// it: no `/proc/PID/stat` opened by a batch that starts no command.)
    #[cfg(target_os = "linux")]
    #[test]
    fn a_child_running_or_exited_is_seen() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.2")
            .spawn()
            .unwrap();
        assert!(!no_children(), "a running child");
        std::thread::sleep(std::time::Duration::from_millis(400));
        assert!(!no_children(), "an exited child not yet waited for");
        // WNOWAIT left its exit status to its owner.
        assert!(child.wait().unwrap().success());
    }
}
