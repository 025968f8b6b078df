//! The escape suite: many distinct attempts to read or write outside the workspace. Each must be
//! refused (or, where the attempt is harmless, stay inside), and afterwards the outside folder
//! must be byte-for-byte unchanged with no new files next to the workspace.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use tagloop::tools::{Access, Registry, ToolError, ToolkitOptions, Workspace, toolkit};

const SECRET: &str = "TOP-SECRET-CONTENT";

struct Lab {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    outside: PathBuf,
    ws: Arc<Workspace>,
    reg: Registry,
}

/// `base/ws` is the workspace; `base/ws_outside` (a name that shares the root's prefix, to catch
/// string-prefix checks) holds the secret.
fn lab() -> Lab {
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = fs::canonicalize(tmp.path()).expect("canonical");
    let root = base.join("ws");
    let outside = base.join("ws_outside");
    fs::create_dir_all(root.join("sub/inner")).expect("mkdir");
    fs::create_dir_all(outside.join("dir")).expect("mkdir");
    fs::write(outside.join("secret.txt"), SECRET).expect("write");
    fs::write(outside.join("dir/deep.txt"), SECRET).expect("write");
    fs::write(root.join("inside.txt"), "inside").expect("write");

    // Links that lead out, in every shape.
    symlink(outside.join("secret.txt"), root.join("link_file")).expect("link");
    symlink(&outside, root.join("link_dir")).expect("link");
    symlink("../../ws_outside", root.join("sub/mid")).expect("link"); // relative, in the middle
    symlink("c2", root.join("c1")).expect("link"); // chain c1 → c2 → c3 → outside
    symlink("sub/c3", root.join("c2")).expect("link");
    symlink(outside.join("secret.txt"), root.join("sub/c3")).expect("link");
    symlink(outside.join("new.txt"), root.join("dangle")).expect("link"); // dangling, points out
    symlink("/dev/zero", root.join("zero")).expect("link");
    symlink("..", root.join("up")).expect("link");
    symlink(
        format!("{}/../ws_outside", root.display()),
        root.join("abs_dotdot"),
    )
    .expect("link");
    symlink("loop2", root.join("loop1")).expect("link");
    symlink("loop1", root.join("loop2")).expect("link");
    // A link that stays inside is fine and is followed.
    symlink("inside.txt", root.join("ok_link")).expect("link");
    let fifo = root.join("fifo");
    let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).expect("cstring");
    // SAFETY: plain libc call with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");

    let ws = Arc::new(Workspace::new(&root).expect("workspace"));
    let reg = toolkit(
        Arc::clone(&ws),
        ToolkitOptions {
            allow_write: true,
            ..ToolkitOptions::default()
        },
    );
    Lab {
        _tmp: tmp,
        base,
        root,
        outside,
        ws,
        reg,
    }
}

/// Every entry under `dir` (not following links) with its content or link target.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            let meta = fs::symlink_metadata(&p).expect("meta");
            let v = if meta.file_type().is_symlink() {
                format!("-> {}", fs::read_link(&p).expect("link").display())
            } else if meta.is_dir() {
                stack.push(p.clone());
                "<dir>".to_string()
            } else if meta.is_file() {
                fs::read_to_string(&p).unwrap_or_else(|_| "<binary>".to_string())
            } else {
                "<special>".to_string()
            };
            out.insert(p, v);
        }
    }
    out
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .expect("read_dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

impl Lab {
    async fn call(&self, name: &str, args: Value) -> Result<String, ToolError> {
        let tool = self.reg.get(name).expect("tool");
        tool.call(args.as_object().cloned().expect("object")).await
    }
}

/// The attempts: (label, tool, args). Each must end in an error, and no output may carry the secret.
fn attempts(l: &Lab) -> Vec<(&'static str, &'static str, Value)> {
    let out_abs = l.outside.join("secret.txt").to_string_lossy().into_owned();
    let root_str = l.root.to_string_lossy().into_owned();
    vec![
        (
            "dotdot",
            "read_file",
            json!({"path": "../ws_outside/secret.txt"}),
        ),
        (
            "nested dotdot",
            "read_file",
            json!({"path": "sub/inner/../../../ws_outside/secret.txt"}),
        ),
        (
            "dotdot above root then back in",
            "read_file",
            json!({"path": "../ws/inside.txt"}),
        ),
        ("absolute outside", "read_file", json!({"path": out_abs})),
        (
            "absolute /etc/passwd",
            "read_file",
            json!({"path": "/etc/passwd"}),
        ),
        (
            "root-prefix sibling",
            "read_file",
            json!({"path": format!("{root_str}_outside/secret.txt")}),
        ),
        (
            "absolute inside then dotdot out",
            "read_file",
            json!({"path": format!("{root_str}/../ws_outside/secret.txt")}),
        ),
        (
            "symlink file out",
            "read_file",
            json!({"path": "link_file"}),
        ),
        (
            "symlink dir out",
            "read_file",
            json!({"path": "link_dir/secret.txt"}),
        ),
        (
            "symlink dir out, deeper",
            "read_file",
            json!({"path": "link_dir/dir/deep.txt"}),
        ),
        (
            "symlink in the middle",
            "read_file",
            json!({"path": "sub/mid/secret.txt"}),
        ),
        ("symlink chain", "read_file", json!({"path": "c1"})),
        (
            "symlink to ..",
            "read_file",
            json!({"path": "up/ws_outside/secret.txt"}),
        ),
        (
            "absolute symlink with dotdot",
            "read_file",
            json!({"path": "abs_dotdot/secret.txt"}),
        ),
        ("symlink loop", "read_file", json!({"path": "loop1"})),
        (
            "NUL byte",
            "read_file",
            json!({"path": "inside.txt\u{0}../../etc/passwd"}),
        ),
        (
            "/dev/zero via symlink",
            "read_file",
            json!({"path": "zero"}),
        ),
        ("FIFO read", "read_file", json!({"path": "fifo"})),
        (
            "FIFO write",
            "write_file",
            json!({"path": "fifo", "content": "x"}),
        ),
        ("tilde home", "read_file", json!({"path": "~/.bashrc"})),
        ("tilde alone", "list_dir", json!({"path": "~"})),
        (
            "backslash dotdot",
            "read_file",
            json!({"path": "..\\ws_outside\\secret.txt"}),
        ),
        ("trailing /..", "list_dir", json!({"path": "sub/../.."})),
        (
            "list symlinked dir",
            "list_dir",
            json!({"path": "link_dir"}),
        ),
        (
            "search symlinked dir",
            "search_files",
            json!({"pattern": "SECRET", "path": "link_dir"}),
        ),
        (
            "search outside",
            "search_files",
            json!({"pattern": "SECRET", "path": "../ws_outside"}),
        ),
        (
            "write dotdot",
            "write_file",
            json!({"path": "../ws_outside/secret.txt", "content": "pwned"}),
        ),
        (
            "write new file outside",
            "write_file",
            json!({"path": "../escaped.txt", "content": "pwned"}),
        ),
        (
            "write absolute outside",
            "write_file",
            json!({"path": l.base.join("escaped.txt").to_string_lossy(), "content": "pwned"}),
        ),
        (
            "write through symlink file",
            "write_file",
            json!({"path": "link_file", "content": "pwned"}),
        ),
        (
            "write through symlinked parent",
            "write_file",
            json!({"path": "link_dir/new.txt", "content": "pwned"}),
        ),
        (
            "write deep through symlinked parent",
            "write_file",
            json!({"path": "link_dir/newdir/new.txt", "content": "pwned"}),
        ),
        (
            "write dangling symlink out",
            "write_file",
            json!({"path": "dangle", "content": "pwned"}),
        ),
        (
            "write through middle symlink",
            "write_file",
            json!({"path": "sub/mid/secret.txt", "content": "pwned"}),
        ),
        (
            "append through symlink",
            "append_file",
            json!({"path": "link_file", "content": "pwned"}),
        ),
        (
            "append dangling symlink",
            "append_file",
            json!({"path": "dangle", "content": "pwned"}),
        ),
        (
            "edit through symlink",
            "edit_file",
            json!({"path": "link_file", "old": SECRET, "new": "pwned"}),
        ),
        (
            "edit through chain",
            "edit_file",
            json!({"path": "c1", "old": SECRET, "new": "pwned"}),
        ),
        (
            "make_dir through symlink",
            "make_dir",
            json!({"path": "link_dir/newdir"}),
        ),
        ("make_dir dotdot", "make_dir", json!({"path": "../newdir"})),
        (
            "move target outside",
            "move_path",
            json!({"from": "inside.txt", "to": "../ws_outside/moved.txt"}),
        ),
        (
            "move target through symlink",
            "move_path",
            json!({"from": "inside.txt", "to": "link_dir/moved.txt"}),
        ),
        (
            "move source outside",
            "move_path",
            json!({"from": "../ws_outside/secret.txt", "to": "stolen.txt"}),
        ),
        (
            "move source through symlink",
            "move_path",
            json!({"from": "link_dir/secret.txt", "to": "stolen.txt"}),
        ),
        (
            "move the root away",
            "move_path",
            json!({"from": ".", "to": "sub/root"}),
        ),
        ("delete root", "delete_path", json!({"path": "."})),
        (
            "delete root absolute",
            "delete_path",
            json!({"path": root_str}),
        ),
        (
            "delete root via sub/..",
            "delete_path",
            json!({"path": "sub/.."}),
        ),
        (
            "delete outside",
            "delete_path",
            json!({"path": "../ws_outside/secret.txt"}),
        ),
        (
            "delete through symlinked parent",
            "delete_path",
            json!({"path": "link_dir/secret.txt"}),
        ),
        (
            "delete outside folder",
            "delete_path",
            json!({"path": "../ws_outside"}),
        ),
        (
            "write NUL path",
            "write_file",
            json!({"path": "a\u{0}b", "content": "x"}),
        ),
    ]
}

#[tokio::test]
async fn no_attempt_reads_or_writes_outside() {
    let l = lab();
    let outside_before = snapshot(&l.outside);
    let base_before = names_in(&l.base);
    let list = attempts(&l);
    assert!(list.len() >= 20, "{}", list.len());
    let mut report = Vec::new();
    for (label, tool, args) in list {
        let r = tokio::time::timeout(std::time::Duration::from_secs(10), l.call(tool, args))
            .await
            .unwrap_or_else(|_| panic!("{label}: hung (FIFO opened?)"));
        match &r {
            Ok(text) => report.push(format!("{label}: NOT refused, got {text:?}")),
            Err(e) => {
                if e.to_string().contains(SECRET) {
                    report.push(format!("{label}: error leaks the secret: {e}"));
                }
            }
        }
    }
    assert!(report.is_empty(), "escapes:\n{}", report.join("\n"));
    assert_eq!(
        snapshot(&l.outside),
        outside_before,
        "the outside folder changed"
    );
    assert_eq!(
        names_in(&l.base),
        base_before,
        "new files next to the workspace"
    );
    assert_eq!(
        fs::read_to_string(l.outside.join("secret.txt")).expect("read"),
        SECRET
    );
    assert!(!l.outside.join("new.txt").exists());
}

#[tokio::test]
async fn escapes_are_refused_with_a_clear_reason() {
    let l = lab();
    let refusal = |r: Result<String, ToolError>| match r {
        Err(ToolError::Refused(m)) => m,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let m = refusal(
        l.call("read_file", json!({"path": "../ws_outside/secret.txt"}))
            .await,
    );
    assert!(m.contains("outside the workspace"), "{m}");
    let m = refusal(l.call("read_file", json!({"path": "/etc/passwd"})).await);
    assert!(m.contains("outside the workspace"), "{m}");
    let m = refusal(
        l.call("read_file", json!({"path": "sub/mid/secret.txt"}))
            .await,
    );
    assert!(m.contains("outside the workspace"), "{m}");
    let m = refusal(l.call("read_file", json!({"path": "fifo"})).await);
    assert!(m.contains("not a regular file"), "{m}");
    let m = refusal(l.call("read_file", json!({"path": "loop1"})).await);
    assert!(m.contains("symbolic links"), "{m}");
    let m = refusal(l.call("read_file", json!({"path": "a\u{0}"})).await);
    assert!(m.contains("NUL"), "{m}");
    let m = refusal(l.call("read_file", json!({"path": "~/x"})).await);
    assert!(m.contains('~'), "{m}");
    let m = refusal(l.call("read_file", json!({"path": "a\\b"})).await);
    assert!(m.contains("backslash"), "{m}");
    let m = refusal(l.call("delete_path", json!({"path": "."})).await);
    assert!(m.contains("root"), "{m}");
}

#[tokio::test]
async fn harmless_lookalikes_stay_inside() {
    let l = lab();
    // `%2e%2e` is a literal folder name, not `..`: it is created inside.
    l.call(
        "write_file",
        json!({"path": "%2e%2e/x.txt", "content": "fine"}),
    )
    .await
    .expect("literal name inside");
    assert_eq!(
        fs::read_to_string(l.root.join("%2e%2e/x.txt")).expect("read"),
        "fine"
    );
    let r = l
        .call(
            "read_file",
            json!({"path": "%2e%2e/%2e%2e/ws_outside/secret.txt"}),
        )
        .await;
    assert!(matches!(r, Err(ToolError::Failed(_))), "{r:?}");
    // `..` that stays inside is fine; so is a link that stays inside.
    assert_eq!(
        l.call("read_file", json!({"path": "sub/inner/../../inside.txt"}))
            .await,
        Ok("inside".to_string())
    );
    assert_eq!(
        l.call("read_file", json!({"path": "ok_link"})).await,
        Ok("inside".to_string())
    );
    // Writing through an inside link writes its target.
    l.call(
        "write_file",
        json!({"path": "ok_link", "content": "changed"}),
    )
    .await
    .expect("inside link");
    assert_eq!(
        fs::read_to_string(l.root.join("inside.txt")).expect("read"),
        "changed"
    );
    // Deleting a link that points out deletes the link only.
    l.call("delete_path", json!({"path": "link_file"}))
        .await
        .expect("delete the link itself");
    assert!(fs::symlink_metadata(l.root.join("link_file")).is_err());
    assert_eq!(
        fs::read_to_string(l.outside.join("secret.txt")).expect("read"),
        SECRET
    );
    // Moving a link that points out moves the link, not the target.
    l.call(
        "move_path",
        json!({"from": "link_dir", "to": "sub/link_dir2"}),
    )
    .await
    .expect("move the link itself");
    assert!(l.outside.join("secret.txt").exists());
    assert!(
        fs::symlink_metadata(l.root.join("sub/link_dir2"))
            .expect("moved")
            .file_type()
            .is_symlink()
    );
    // Deleting a folder that contains a link out leaves the target alone.
    l.call("delete_path", json!({"path": "sub"}))
        .await
        .expect("delete sub");
    assert_eq!(
        fs::read_to_string(l.outside.join("dir/deep.txt")).expect("read"),
        SECRET
    );
}

#[tokio::test]
async fn listing_and_searching_never_follow_links_out() {
    let l = lab();
    let out = l
        .call("list_dir", json!({"recursive": true}))
        .await
        .expect("list");
    assert!(
        !out.contains("secret.txt") && !out.contains("deep.txt"),
        "{out}"
    );
    assert!(out.contains("link_dir (symbolic link)"), "{out}");
    assert!(out.contains("fifo (special file)"), "{out}");
    let out = l
        .call("search_files", json!({"pattern": "SECRET"}))
        .await
        .expect("search");
    assert!(out.starts_with("no matches"), "{out}");
}

#[test]
fn resolve_api_directly() {
    let l = lab();
    let ws = &l.ws;
    assert_eq!(ws.resolve("", Access::Read).ok(), Some(l.root.clone()));
    assert_eq!(ws.resolve(".", Access::Read).ok(), Some(l.root.clone()));
    assert_eq!(
        ws.resolve("sub/./inner/", Access::Read).ok(),
        Some(l.root.join("sub/inner"))
    );
    assert_eq!(
        ws.resolve("new/dir/file", Access::Write).ok(),
        Some(l.root.join("new/dir/file"))
    );
    assert!(matches!(
        ws.resolve("new/../../x", Access::Write),
        Err(ToolError::Refused(_))
    ));
    assert_eq!(
        ws.resolve("c1", Access::Entry).ok(),
        Some(l.root.join("c1")),
        "entries are not followed"
    );
    assert!(matches!(
        ws.resolve("link_dir/secret.txt", Access::Entry),
        Err(ToolError::Refused(_))
    ));
    assert_eq!(ws.display(&l.root.join("a/b")), "a/b");
    assert_eq!(ws.display(&l.root), ".");
    assert!(Workspace::new(l.root.join("inside.txt")).is_err());
    assert!(Workspace::new(l.root.join("missing")).is_err());
}
