//! `tagloop serve` as a child process for tests: started on `127.0.0.1:0` in front of an
//! upstream, its address read from the one line it prints once bound, killed when dropped.
//!
//! ```ignore
//! let serve = Serve::start(&fake.base_url, &["--model", "fake-model"]);
//! // point a client at serve.base_url ("http://127.0.0.1:PORT/v1")
//! ```

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// The line `tagloop serve` prints to stdout once it listens, followed by `http://ADDR`.
const LISTENING: &str = "tagloop serve: listening on ";

/// How long the server may take to bind: it only parses its flags and opens a socket, so this
/// bounds a hang (or a build that never prints the line), not a speed.
const BIND_LIMIT: Duration = Duration::from_secs(60);

/// A running `tagloop serve`, killed when dropped.
pub struct Serve {
    child: Child,
    /// `http://127.0.0.1:PORT/v1`, what an OpenAI SDK takes as its base URL.
    pub base_url: String,
    stderr: Arc<Mutex<Vec<String>>>,
    _home: tempfile::TempDir,
}

impl Serve {
    /// Start `tagloop serve --upstream UPSTREAM --listen 127.0.0.1:0 EXTRA…` with nothing from
    /// the developer's environment (no key, model, log filter or user config), and wait for
    /// the line that says where it listens. Panics with the server's stderr if it exits or
    /// stays silent instead.
    pub fn start(upstream: &str, extra: &[&str]) -> Serve {
        Serve::start_with_env(upstream, extra, &[])
    }

    /// [`Serve::start`] with these environment variables set (a key `--api-key-env` names).
    pub fn start_with_env(upstream: &str, extra: &[&str], env: &[(&str, &str)]) -> Serve {
        let home = tempfile::tempdir().expect("a temporary folder");
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("tagloop"))
            .current_dir(home.path())
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("TAGLOOP_MODEL")
            .env_remove("RUST_LOG")
            .env("XDG_CONFIG_HOME", home.path().join("noconf"))
            .env("NO_COLOR", "1")
            .args(["serve", "--upstream", upstream, "--listen", "127.0.0.1:0"])
            .args(extra)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start `tagloop serve`");
        let stderr = drain_lines(child.stderr.take());
        let (tx, rx) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            // Read every stdout line (the pipe must never fill up), passing on the first one
            // that says where the server listens.
            std::thread::spawn(move || {
                let mut tx = Some(tx);
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if let Some(addr) = line.strip_prefix(LISTENING)
                        && let Some(tx) = tx.take()
                    {
                        let _ = tx.send(addr.trim().to_owned());
                    }
                }
            });
        }
        let addr = rx.recv_timeout(BIND_LIMIT);
        let log = || stderr.lock().map(|l| l.join("\n")).unwrap_or_default();
        match addr {
            Ok(addr) => Serve {
                child,
                base_url: format!("{}/v1", addr.trim_end_matches('/')),
                stderr,
                _home: home,
            },
            Err(_) => {
                let _ = child.kill();
                let status = child.wait();
                panic!(
                    "`tagloop serve` printed no `{LISTENING}…` line ({status:?}); stderr:\n{}",
                    log()
                );
            }
        }
    }

    /// The server's process id (to read its memory from `/proc`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the server wrote to stderr so far (its log), for failure messages.
    pub fn log(&self) -> String {
        self.stderr.lock().map(|l| l.join("\n")).unwrap_or_default()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Keep a pipe's lines in memory (the last 2000 at most) so the child never blocks on it.
pub fn drain_lines<R: std::io::Read + Send + 'static>(pipe: Option<R>) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    if let Some(pipe) = pipe {
        let lines = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if let Ok(mut l) = lines.lock() {
                    if l.len() >= 2000 {
                        l.drain(..1000);
                    }
                    l.push(line);
                }
            }
        });
    }
    lines
}
