//! The Python clients (`tests/py/`) run by the serve tests, in the venv that
//! `scripts/setup-pyclients.sh` installs. A missing or stale venv fails the test with the
//! command to run: the real-client tests never skip.

#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The venv's folder, found as the setup script finds it: `$TAGLOOP_PY_DIR`, else
/// `${XDG_CACHE_HOME:-$HOME/.cache}/tagloop-py`.
pub fn venv_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TAGLOOP_PY_DIR") {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    cache.join("tagloop-py")
}

/// The venv's python. Panics, naming the setup script, when the venv is missing or was built
/// from another `tests/py/requirements.txt` than the checkout's.
pub fn python() -> PathBuf {
    let dir = venv_dir();
    let python = dir.join("bin/python");
    let wanted = std::fs::read(scripts_dir().join("requirements.txt"))
        .expect("tests/py/requirements.txt is readable");
    let built_from = std::fs::read(dir.join("tagloop-requirements.txt")).ok();
    assert!(
        python.exists() && built_from.as_deref() == Some(&wanted[..]),
        "the Python client venv is missing or stale in {}: run scripts/setup-pyclients.sh \
         (scripts/test.sh does)",
        dir.display()
    );
    python
}

/// `tests/py/`.
pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py")
}

/// What a script did.
#[derive(Debug)]
pub struct ScriptRun {
    /// Whether it exited 0 (every check held).
    pub ok: bool,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr (the failed check, or a traceback).
    pub stderr: String,
}

/// Run `tests/py/SCRIPT` against a server at `base_url` (`…/v1`) asking for `model`. The
/// script is killed, and the test fails, if it has not ended after `limit`: a hang must not
/// hang the suite. Tracing to LangSmith is switched off (no request leaves the machine).
pub fn run_script(script: &str, base_url: &str, model: &str, limit: Duration) -> ScriptRun {
    let mut child = Command::new(python())
        .arg(scripts_dir().join(script))
        .current_dir(scripts_dir())
        .env("TAGLOOP_SERVE_URL", base_url)
        .env("TAGLOOP_SERVE_MODEL", model)
        .env("LANGSMITH_TRACING", "false")
        .env("LANGCHAIN_TRACING_V2", "false")
        .env("PYTHONUNBUFFERED", "1")
        // No __pycache__ left in tests/py (the checkout stays clean).
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start the venv's python");
    let stdout = read_capped(child.stdout.take());
    let stderr = read_capped(child.stderr.take());
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() < limit => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    // The pipes close when the script has exited (or was killed): the readers end then.
    let run = ScriptRun {
        ok: status.is_some_and(|s| s.success()),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    };
    assert!(
        status.is_some(),
        "{script} did not end within {limit:?}; it printed:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    run
}

/// Read a pipe to its end on a thread, keeping the first MiB (a script prints a few lines; a
/// runaway one must not fill the test's memory) and discarding the rest so the child never
/// blocks on a full pipe.
fn read_capped<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let Some(mut pipe) = pipe else {
            return String::new();
        };
        let mut kept = Vec::new();
        let _ = (&mut pipe).take(1 << 20).read_to_end(&mut kept);
        let _ = std::io::copy(&mut pipe, &mut std::io::sink());
        String::from_utf8_lossy(&kept).into_owned()
    })
}
