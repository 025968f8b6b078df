//! The binary in a folder of its own: a temporary folder with a workspace (`ws/`) and a session
//! folder (`sessions/`), and the command that runs `tagloop` there with nothing from the
//! developer's environment (no server, key, model, log filter, user config or colour).

use std::path::PathBuf;
use std::time::Duration;

use assert_cmd::Command;

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
