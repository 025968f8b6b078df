//! The real-model lab for tests and benches: finds what `scripts/real-models.sh` installed and
//! starts llama.cpp's `llama-server` on a free loopback port, stopped when dropped.
//!
//! The lab is found through `$TAGLOOP_LAB_DIR/lab.env` (default `~/.cache/tagloop-lab`). When it
//! is missing, [`Lab::find`] returns `None` and the caller skips, except on CI (`CI=true`),
//! where `scripts/test.sh` installs it first and a missing lab is a failure.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What the lab installed.
#[derive(Debug, Clone)]
pub struct Lab {
    /// The llama-server binary.
    pub server: PathBuf,
    /// SmolLM2-135M-Instruct (an instruct model with a chat template): use over chat.
    pub smollm2: PathBuf,
    /// gemma-3-270m (a base model): use over completions.
    pub gemma: PathBuf,
    /// Qwen2.5-Coder-0.5B-Instruct (chat, with Qwen's native tool-calling template).
    pub qwen05: PathBuf,
    /// Qwen2.5-Coder-1.5B-Instruct, when the lab was installed with it (measurements only).
    pub qwen15: Option<PathBuf>,
}

/// Which model a server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabModel {
    /// SmolLM2-135M-Instruct, served with its chat template.
    SmolLm2,
    /// gemma-3-270m base.
    Gemma,
    /// Qwen2.5-Coder-0.5B-Instruct, served with its chat template.
    Qwen05,
}

/// Held by each real-model test while it runs: the machine has two cores, and a test that
/// measures time (a run must end within 90 s) must not share them with another model server.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Lab {
    /// Wait until no other real-model test runs; the returned guard keeps the others waiting.
    pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
        // A test that panicked while holding the lock leaves it poisoned: the lock is still fine.
        ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The installed lab, or `None` (with a note on stderr) when it is not installed. Panics on
    /// CI, where it must be.
    pub fn find() -> Option<Lab> {
        let dir = std::env::var_os("TAGLOOP_LAB_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/tagloop-lab"))
            });
        let env: HashMap<String, String> = dir
            .as_ref()
            .and_then(|d| std::fs::read_to_string(d.join("lab.env")).ok())
            .map(|text| {
                text.lines()
                    .filter_map(|l| l.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let path = |k: &str| env.get(k).map(PathBuf::from).filter(|p| p.exists());
        match (
            path("LLAMA_SERVER"),
            path("SMOLLM2_GGUF"),
            path("GEMMA_GGUF"),
            path("QWEN05_GGUF"),
        ) {
            (Some(server), Some(smollm2), Some(gemma), Some(qwen05)) => Some(Lab {
                server,
                smollm2,
                gemma,
                qwen05,
                qwen15: path("QWEN15_GGUF"),
            }),
            _ => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "the real-model lab is not installed (scripts/real-models.sh)"
                );
                eprintln!(
                    "skipped: the real-model lab is not installed (run scripts/real-models.sh)"
                );
                None
            }
        }
    }

    /// Start a server for `model` and wait until it answers.
    pub fn start(&self, model: LabModel) -> LlamaServer {
        let (gguf, chat) = match model {
            LabModel::SmolLm2 => (&self.smollm2, true),
            LabModel::Gemma => (&self.gemma, false),
            LabModel::Qwen05 => (&self.qwen05, true),
        };
        let mut last_error = String::new();
        for _ in 0..3 {
            let port = free_port();
            let mut cmd = Command::new(&self.server);
            cmd.arg("-m")
                .arg(gguf)
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                // Small context and two threads: what a laptop CPU run looks like, and quick.
                .args(["-c", "8192", "-t", "2", "--parallel", "1", "--no-webui"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            if chat {
                cmd.arg("--jinja");
            }
            let mut child = match cmd.spawn() {
                Ok(c) => c,
                Err(e) => panic!("cannot start {}: {e}", self.server.display()),
            };
            let log = drain(&mut child);
            let base = format!("http://127.0.0.1:{port}");
            if wait_healthy(&base, &mut child, Duration::from_secs(60)) {
                return LlamaServer {
                    child,
                    base_url: format!("{base}/v1"),
                    model,
                    log,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
            last_error = log.lock().map(|l| l.join("\n")).unwrap_or_default();
        }
        panic!("llama-server did not start:\n{last_error}");
    }
}

/// A running llama-server, killed when dropped.
pub struct LlamaServer {
    child: Child,
    /// `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
    /// The model it serves.
    pub model: LabModel,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl LlamaServer {
    /// The last lines the server wrote (for failure messages).
    pub fn log_tail(&self) -> String {
        self.log
            .lock()
            .map(|l| {
                l.iter()
                    .rev()
                    .take(20)
                    .rev()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Keep the server's stderr (its log) in memory, so the pipe never fills up.
fn drain(child: &mut Child) -> std::sync::Arc<std::sync::Mutex<Vec<String>>> {
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    if let Some(err) = child.stderr.take() {
        let log = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if let Ok(mut l) = log.lock() {
                    if l.len() > 2000 {
                        l.drain(..1000);
                    }
                    l.push(line);
                }
            }
        });
    }
    log
}

/// Poll `GET /health` until it answers 200 (the model is loaded), the child exits, or time runs out.
fn wait_healthy(base: &str, child: &mut Child, limit: Duration) -> bool {
    let started = Instant::now();
    let addr = base.trim_start_matches("http://").to_string();
    while started.elapsed() < limit {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if let Ok(mut s) = std::net::TcpStream::connect(&addr) {
            use std::io::{Read, Write};
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let req = format!("GET /health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
            let mut answer = String::new();
            if s.write_all(req.as_bytes()).is_ok()
                && s.read_to_string(&mut answer).is_ok()
                && answer.starts_with("HTTP/1.1 200")
            {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}
