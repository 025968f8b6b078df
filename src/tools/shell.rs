//! `run_command`'s engine: `sh -c` in its own process group, with a timeout, capped output and
//! every process the command started killed when it ends, times out or the call is cancelled.
//!
//! "Every process" means the process group, the shell's whole tree (found through `/proc`, so
//! `setsid` children are included while their parent lives) and, when tagloop is the subreaper
//! ([`super::children::harden_process`]), the orphans marked with the command's job that were
//! re-parented to tagloop. Background processes therefore never outlive the command that started
//! them. The environment is [`ChildEnv`]'s: no key tagloop knows of.

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::ToolError;
use super::children::{ChildEnv, Job, forget, kill_tree};

/// Output kept from one stream: the first and the last half of the cap, and how much was cut.
#[derive(Debug, Clone, Default)]
pub struct Capped {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: usize,
    cap: usize,
}

impl Capped {
    /// Keep at most `cap` bytes (half from the start, half from the end).
    pub fn new(cap: usize) -> Self {
        Capped {
            cap,
            ..Default::default()
        }
    }

    /// Add bytes read from the stream.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        let head_cap = self.cap / 2 + self.cap % 2;
        if self.head.len() < head_cap {
            let take = (head_cap - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        let tail_cap = self.cap / 2;
        if tail_cap == 0 {
            return;
        }
        if bytes.len() >= tail_cap {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - tail_cap..]);
        } else {
            let overflow = (self.tail.len() + bytes.len()).saturating_sub(tail_cap);
            self.tail.drain(..overflow);
            self.tail.extend(bytes);
        }
    }

    /// Total bytes the stream produced.
    pub fn total(&self) -> usize {
        self.total
    }

    /// The kept text (lossy UTF-8) with a visible marker where bytes were cut.
    pub fn render(&self) -> String {
        let kept = self.head.len() + self.tail.len();
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        if self.total > kept {
            out.push_str(&format!(
                "\n[… output cut: {} of {} bytes not shown …]\n",
                self.total - kept,
                self.total
            ));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        out.push_str(&String::from_utf8_lossy(&tail));
        out
    }
}

/// How a command ended.
#[derive(Debug, Clone)]
pub struct CommandOutput {
    /// The exit code, when it exited normally.
    pub code: Option<i32>,
    /// The signal that killed it, if any.
    pub signal: Option<i32>,
    /// Whether the timeout fired (the group was killed).
    pub timed_out: bool,
    /// Captured stdout.
    pub stdout: Capped,
    /// Captured stderr.
    pub stderr: Capped,
}

impl CommandOutput {
    /// The text the model sees: the exit status, then each non-empty stream under a header.
    pub fn render(&self) -> String {
        let mut out = match (self.code, self.signal) {
            (Some(c), _) => format!("exit code: {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            (None, None) => "exit status unknown".to_string(),
        };
        let (so, se) = (self.stdout.render(), self.stderr.render());
        if so.is_empty() && se.is_empty() {
            out.push_str(" (no output)");
        }
        for (name, text) in [("stdout", so), ("stderr", se)] {
            if !text.is_empty() {
                out.push_str(&format!("\n--- {name} ---\n{text}"));
                if !text.ends_with('\n') {
                    out.push('\n');
                }
            }
        }
        out
    }
}

/// Kills the whole process group and the shell's tree when dropped: after the command ends (no
/// process outlives its command), on timeout, and when the caller's future is dropped (cancelled
/// run). The [`Job`] it holds then kills the orphans marked with the command's job.
struct GroupGuard {
    pgid: i32,
    /// The shell's pid while it has not been reaped (after that the pid may be reused).
    pid: Option<u32>,
    job: Job,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            kill_tree(&[pid]);
        }
        kill_group(self.pgid);
        self.job.sweep();
    }
}

fn kill_group(pgid: i32) {
    if pgid > 1 {
        // SAFETY: killpg only sends a signal; pgid is the group our own child leads (process_group(0)).
        let rc = unsafe { libc::killpg(pgid, libc::SIGKILL) };
        if rc != 0 {
            tracing::trace!(pgid, "killpg: {}", std::io::Error::last_os_error());
        }
    }
}

async fn drain<R: AsyncRead + Unpin>(mut r: R, cap: usize) -> Capped {
    let mut kept = Capped::new(cap);
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => kept.push(&buf[..n]),
        }
    }
    kept
}

/// Run `sh -c command` in `cwd`, in a new process group, with stdin closed and the environment
/// `env` gives. `cap` bounds each stream's kept output. On timeout the command and every process
/// it started get `SIGKILL`.
pub async fn run_shell(
    command: &str,
    cwd: &Path,
    timeout: Duration,
    cap: usize,
    env: &ChildEnv,
) -> Result<CommandOutput, ToolError> {
    let args = ["-c".to_string(), command.to_string()];
    run_process(Process {
        program: "sh",
        args: &args,
        cwd,
        timeout,
        cap,
        env,
        stdin: None,
    })
    .await
}

/// A program to run with [`run_process`].
#[derive(Debug, Clone, Copy)]
pub struct Process<'a> {
    /// The program (looked up in `PATH`).
    pub program: &'a str,
    /// Its arguments.
    pub args: &'a [String],
    /// Its working directory.
    pub cwd: &'a Path,
    /// Time limit: on expiry it and every process it started get `SIGKILL`.
    pub timeout: Duration,
    /// Bytes kept of each output stream.
    pub cap: usize,
    /// Its environment (no key tagloop knows of; variables `env` sets).
    pub env: &'a ChildEnv,
    /// Bytes written to its standard input, which is then closed (`None`: no input).
    pub stdin: Option<&'a [u8]>,
}

/// Run a program as [`run_shell`] runs `sh`: its own process group, the time limit, capped
/// output, and every process it started killed when it ends.
pub async fn run_process(p: Process<'_>) -> Result<CommandOutput, ToolError> {
    let mut cmd = tokio::process::Command::new(p.program);
    cmd.args(p.args)
        .current_dir(p.cwd)
        .process_group(0)
        .stdin(if p.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let (cap, timeout, command) = (p.cap, p.timeout, p.program);
    // The model's commands never see a key tagloop knows of (the agent also redacts known secrets
    // from every tool's output).
    p.env.apply(&mut cmd);
    let job = Job::new("cmd");
    let mut child = job
        .spawn(cmd, |mut cmd| {
            let child = cmd.spawn()?;
            let pid = child.id();
            Ok((child, pid))
        })
        .map_err(|e| ToolError::Failed(format!("cannot start `{command}`: {e}")))?;
    let pid = child
        .id()
        .ok_or_else(|| ToolError::Failed("the command exited before it started".to_string()))?;
    let pgid = i32::try_from(pid)
        .map_err(|_| ToolError::Failed(format!("unexpected process id {pid}")))?;
    let mut guard = GroupGuard {
        pgid,
        pid: Some(pid),
        job,
    };
    if let (Some(mut input), Some(bytes)) = (child.stdin.take(), p.stdin) {
        // Written by its own task, so a program that does not read its input cannot block us;
        // dropping the handle closes the pipe.
        let bytes = bytes.to_vec();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let _ = input.write_all(&bytes).await;
        });
    }
    let out_task = child.stdout.take().map(|s| tokio::spawn(drain(s, cap)));
    let err_task = child.stderr.take().map(|s| tokio::spawn(drain(s, cap)));

    let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(status)) => (Some(status), false),
        Ok(Err(e)) => {
            drop(guard);
            return Err(ToolError::Failed(format!("waiting for the command: {e}")));
        }
        Err(_) => {
            // The shell is still alive, so its whole tree can be found from it.
            kill_tree(&[pid]);
            kill_group(pgid);
            (child.wait().await.ok(), true)
        }
    };
    guard.pid = None;
    forget(pid);
    // Anything the command left running (its group, its tree, its orphans) goes now, so the
    // pipes close.
    drop(guard);

    let collect = |task: Option<tokio::task::JoinHandle<Capped>>| async move {
        match task {
            Some(mut t) => match tokio::time::timeout(Duration::from_secs(1), &mut t).await {
                Ok(Ok(c)) => c,
                _ => {
                    // A process that left the group (setsid) still holds the pipe.
                    t.abort();
                    let mut c = Capped::new(cap);
                    c.push(b"[output unavailable: a process that left the command's group kept the pipe open]");
                    c
                }
            },
            None => Capped::new(cap),
        }
    };
    let stdout = collect(out_task).await;
    let stderr = collect(err_task).await;

    use std::os::unix::process::ExitStatusExt;
    Ok(CommandOutput {
        code: status.and_then(|s| s.code()),
        signal: status.and_then(|s| s.signal()),
        timed_out,
        stdout,
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_keeps_head_and_tail() {
        let mut c = Capped::new(10);
        c.push(b"0123456789abcdefghij");
        let r = c.render();
        assert!(r.starts_with("01234"), "{r}");
        assert!(r.ends_with("fghij"), "{r}");
        assert!(r.contains("10 of 20 bytes not shown"), "{r}");
    }

    #[test]
    fn capped_small_output_is_whole() {
        let mut c = Capped::new(100);
        c.push(b"hello ");
        c.push(b"world");
        assert_eq!(c.render(), "hello world");
        assert_eq!(c.total(), 11);
    }

    #[test]
    fn capped_tail_across_pushes() {
        let mut c = Capped::new(4);
        for b in b"abcdefgh" {
            c.push(&[*b]);
        }
        let r = c.render();
        assert!(r.starts_with("ab") && r.ends_with("gh"), "{r}");
    }
}
