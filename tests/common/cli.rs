//! The binary in a folder of its own: a temporary folder with a workspace (`ws/`) and a session
//! folder (`sessions/`), and the command that runs `tagloop` there with nothing from the
//! developer's environment (no server, key, model, log filter, user config or colour).

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;

/// A temporary folder for one test's runs.
pub struct Env {
    /// The folder (removed when the test ends).
    pub dir: tempfile::TempDir,
}

impl Env {
    /// A fresh folder with `ws/` and `sessions/` in it.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        std::fs::create_dir_all(dir.path().join("sessions")).unwrap();
        Env { dir }
    }

    /// `p` inside the folder.
    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// `tagloop` run in the folder, as a plain process (for tests that handle its pipes).
    pub fn std_cmd(&self) -> std::process::Command {
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("tagloop"));
        c.current_dir(self.dir.path())
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("TAGLOOP_MODEL")
            .env_remove("RUST_LOG")
            .env("XDG_CONFIG_HOME", self.path("noconf"))
            .env("XDG_DATA_HOME", self.path("data"))
            .env("TAGLOOP_SESSION_DIR", self.path("sessions"))
            .env("NO_COLOR", "1");
        c
    }

    /// `tagloop` run in the folder, killed after two minutes (a hung run fails its test
    /// instead of the whole suite).
    pub fn cmd(&self) -> Command {
        let mut c = Command::from_std(self.std_cmd());
        c.timeout(Duration::from_secs(120));
        c
    }
}

impl Env {
    /// A script file `name` in the folder, of these turns: its path.
    pub fn turns_file(&self, name: &str, turns: &[&str]) -> String {
        super::script::file(&self.path(name), turns)
    }

    /// `tagloop continue EXTRA… --json --workspace ws/` in the folder, which must succeed: its
    /// JSON outcome.
    pub fn continue_ok(&self, extra: &[&str]) -> Value {
        outcome(
            &self
                .cmd()
                .arg("continue")
                .args(extra)
                .args(["--json", "--workspace"])
                .arg(self.path("ws"))
                .assert()
                .code(0)
                .get_output()
                .stdout,
        )
    }

    /// `tagloop run --model MODEL --workspace ws/ EXTRA…` in the folder.
    pub fn run_model(&self, model: &str, extra: &[&str]) -> Command {
        let mut c = self.cmd();
        c.args(["run", "--model", model, "--workspace"])
            .arg(self.path("ws"))
            .args(extra);
        c
    }
}

/// The one JSON object `--json` printed.
pub fn outcome(out: &[u8]) -> Value {
    serde_json::from_slice(out).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {}",
            String::from_utf8_lossy(out)
        )
    })
}

/// Every file under `dir`, with its bytes (to look for a key in all of them).
pub fn all_files(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            all_files(&p, out);
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
}
