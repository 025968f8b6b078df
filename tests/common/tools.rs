//! The built-in tools over a fresh workspace, and what their tests check of a result.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use tagloop::tools::{Registry, ToolError, ToolkitOptions, Workspace, toolkit};

/// A workspace (`ws/` in a temporary folder) and the built-in tools over it.
pub struct Env {
    _tmp: tempfile::TempDir,
    /// The workspace's root.
    pub root: PathBuf,
    /// The tools.
    pub reg: Registry,
}

/// The tools `opts` enable, over a fresh workspace.
pub fn env_with(opts: ToolkitOptions) -> Env {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("ws");
    fs::create_dir(&root).expect("mkdir ws");
    let ws = Arc::new(Workspace::new(&root).expect("workspace"));
    let root = ws.root().to_path_buf();
    Env {
        _tmp: tmp,
        root,
        reg: toolkit(ws, opts),
    }
}

/// Every tool, writes and commands included.
pub fn env_rw() -> Env {
    env_with(ToolkitOptions {
        allow_write: true,
        allow_shell: true,
        ..ToolkitOptions::default()
    })
}

impl Env {
    /// Call tool `name` with `args`.
    pub async fn call(&self, name: &str, args: Value) -> Result<String, ToolError> {
        let tool = self
            .reg
            .get(name)
            .unwrap_or_else(|| panic!("tool {name} not in registry"));
        tool.call(args.as_object().cloned().expect("object")).await
    }

    /// Write `content` to `rel`, parents made.
    pub fn write(&self, rel: &str, content: &str) {
        let p = self.root.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).expect("mkdir");
        }
        fs::write(p, content).expect("write");
    }

    /// The text of `rel`.
    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.root.join(rel)).expect("read")
    }

    /// The path of `rel`.
    pub fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
}

/// The refusal's message (panics on anything else).
pub fn refused(r: &Result<String, ToolError>) -> &str {
    match r {
        Err(ToolError::Refused(m)) => m,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The failure's message (panics on anything else).
pub fn failed(r: &Result<String, ToolError>) -> &str {
    match r {
        Err(ToolError::Failed(m)) => m,
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// Asserts that no write left a temporary file in `dir`.
pub fn no_temp_files(dir: &Path) {
    for e in fs::read_dir(dir).expect("read_dir").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(
            !name.starts_with(".tagloop-"),
            "temp file left behind: {name}"
        );
    }
}

// ------------------------------------------------------------------------------------------
// Gates
