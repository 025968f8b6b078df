//! Attacks on the file tools (issue 9, items 3, 5, 6 and 12): each test reproduces what a model
//! (or a process racing it) could do before the fix and checks that it is refused or bounded.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use tagloop::tools::{Limits, Registry, ToolError, ToolkitOptions, Workspace, toolkit};

const KEY: &str = "sk-test-0123456789abcdefSECRET";

struct Env {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    reg: Registry,
}

fn env_with(limits: Limits) -> Env {
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = fs::canonicalize(tmp.path()).expect("canonical");
    let root = base.join("ws");
    let outside = base.join("outside");
    fs::create_dir_all(&root).expect("mkdir ws");
    fs::create_dir_all(&outside).expect("mkdir outside");
    let ws = Arc::new(Workspace::new(&root).expect("workspace"));
    let reg = toolkit(
        ws,
        ToolkitOptions {
            allow_write: true,
            limits,
            ..ToolkitOptions::default()
        },
    );
    Env {
        _tmp: tmp,
        root,
        outside,
        reg,
    }
}

fn env() -> Env {
    env_with(Limits::default())
}

impl Env {
    async fn call(&self, name: &str, args: Value) -> Result<String, ToolError> {
        let tool = self.reg.get(name).expect("tool in registry");
        tool.call(args.as_object().cloned().expect("object")).await
    }
}

fn refused(r: &Result<String, ToolError>) -> String {
    match r {
        Err(ToolError::Refused(m)) => m.clone(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn failed(r: &Result<String, ToolError>) -> String {
    match r {
        Err(ToolError::Failed(m)) => m.clone(),
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// Peak resident set size of this process (`VmHWM`), in KiB.
fn peak_rss_kib() -> u64 {
    let status = fs::read_to_string("/proc/self/status").expect("status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM");
    line.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("number")
}

/// A sparse file: `head` then zeros up to `len` bytes (no disk space used).
fn sparse(path: &Path, head: &[u8], len: u64) {
    fs::write(path, head).expect("write head");
    let f = fs::OpenOptions::new().write(true).open(path).expect("open");
    f.set_len(len).expect("set_len");
}

// ---------------------------------------------------------------------------------------------
// Item 3 / 1: tagloop's own configuration and secret files

#[tokio::test]
async fn the_key_in_dot_env_cannot_be_read_edited_or_searched() {
    let env = env();
    let dotenv = format!("OPENAI_API_KEY={KEY}\n");
    fs::write(env.root.join(".env"), &dotenv).expect("write .env");
    fs::write(env.root.join(".env.local"), &dotenv).expect("write .env.local");
    fs::write(env.root.join("notes.txt"), "no key here\n").expect("write");

    // The attack: split the key with a space so that exact-text redaction misses it, then read.
    let r = env
        .call(
            "edit_file",
            json!({"path": ".env", "old": "sk-test", "new": "sk- test"}),
        )
        .await;
    assert!(refused(&r).contains("configuration or secret"), "{r:?}");
    for path in [".env", "./.env", ".env.local", "sub/../.env", ".ENV"] {
        let r = env.call("read_file", json!({"path": path})).await;
        assert!(
            matches!(&r, Err(ToolError::Refused(_)) | Err(ToolError::Failed(_))),
            "{path}: {r:?}"
        );
        assert!(!format!("{r:?}").contains("SECRET"), "{path}: {r:?}");
    }
    // A link inside the workspace that points at `.env` is refused too.
    symlink(".env", env.root.join("alias")).expect("link");
    let r = env.call("read_file", json!({"path": "alias"})).await;
    assert!(refused(&r).contains(".env"), "{r:?}");

    // Bit by bit: does the key start with `sk-t`? A match would say so.
    let r = env
        .call("search_files", json!({"pattern": "sk-t", "path": "."}))
        .await
        .expect("search");
    assert!(r.starts_with("no matches"), "{r}");
    let r = env
        .call("search_files", json!({"pattern": "sk-t", "path": ".env"}))
        .await;
    refused(&r);
    // Nothing was changed.
    assert_eq!(
        fs::read_to_string(env.root.join(".env")).expect("read"),
        dotenv
    );
}

#[tokio::test]
async fn config_files_cannot_be_created_moved_into_or_deleted() {
    let env = env();
    let planted = "[providers.evil]\nbase_url = \"http://127.0.0.1:9/v1\"\n";
    for path in [
        "tagloop.toml",
        "./tagloop.toml",
        "sub/tagloop.toml",
        "TAGLOOP.TOML",
        ".env",
        ".env.production",
    ] {
        let r = env
            .call("write_file", json!({"path": path, "content": planted}))
            .await;
        assert!(refused(&r).contains("configuration"), "{path}: {r:?}");
        let r = env
            .call("append_file", json!({"path": path, "content": planted}))
            .await;
        refused(&r);
    }
    fs::write(env.root.join("draft.toml"), planted).expect("write");
    let r = env
        .call(
            "move_path",
            json!({"from": "draft.toml", "to": "tagloop.toml"}),
        )
        .await;
    refused(&r);
    fs::write(env.root.join(".env"), "OPENAI_API_KEY=x\n").expect("write");
    let r = env
        .call("move_path", json!({"from": ".env", "to": "plain.txt"}))
        .await;
    refused(&r);
    let r = env.call("delete_path", json!({"path": ".env"})).await;
    refused(&r);
    assert!(!env.root.join("tagloop.toml").exists());
    assert!(!env.root.join("sub").exists());
    assert!(env.root.join(".env").exists());
    // Look-alikes are ordinary files.
    env.call(
        "write_file",
        json!({"path": "tagloop.toml.example", "content": "x"}),
    )
    .await
    .expect("write a look-alike");
    env.call("write_file", json!({"path": ".envrc", "content": "x"}))
        .await
        .expect("write a look-alike");
    // list_dir may show the names.
    let listing = env
        .call("list_dir", json!({"path": "."}))
        .await
        .expect("list");
    assert!(listing.contains(".env"), "{listing}");
}

// ---------------------------------------------------------------------------------------------
// Item 5: memory is bounded

#[tokio::test]
async fn a_line_longer_than_the_cap_is_cut_with_a_marker_and_a_bounded_way_on() {
    let env = env_with(Limits {
        read_max_bytes: 100,
        ..Limits::default()
    });
    let long = "x".repeat(10_000);
    fs::write(env.root.join("long.txt"), format!("{long}\nsecond\n")).expect("write");
    for args in [
        json!({"path": "long.txt"}),
        json!({"path": "long.txt", "start_line": 1}),
    ] {
        let r = env.call("read_file", args).await.expect("read");
        assert!(r.starts_with(&"x".repeat(100)), "{r}");
        assert!(!r.contains(&"x".repeat(101)), "{r}");
        assert!(
            r.contains("line 1 of `long.txt` is longer than 100 bytes"),
            "{r}"
        );
        assert!(r.contains("Read on with start_line=2"), "{r}");
    }
    let r = env
        .call("read_file", json!({"path": "long.txt", "start_line": 2}))
        .await
        .expect("read on");
    assert_eq!(r, "second\n");
}

#[tokio::test]
async fn search_skips_and_names_a_file_with_a_giant_line() {
    let env = env_with(Limits {
        search_max_line_bytes: 4096,
        ..Limits::default()
    });
    fs::write(env.root.join("giant.txt"), "a".repeat(200_000) + "NEEDLE\n").expect("write");
    fs::write(env.root.join("small.txt"), "NEEDLE here\n").expect("write");
    let r = env
        .call("search_files", json!({"pattern": "NEEDLE"}))
        .await
        .expect("search");
    assert!(r.contains("small.txt:1: NEEDLE here"), "{r}");
    assert!(
        r.contains("skipped, a line longer than 4096 bytes: giant.txt"),
        "{r}"
    );
}

#[tokio::test]
async fn edit_file_refuses_a_file_above_its_limit() {
    let env = env_with(Limits {
        edit_max_bytes: 1000,
        ..Limits::default()
    });
    let text = "y".repeat(2000) + "OLD";
    fs::write(env.root.join("big.txt"), &text).expect("write");
    let r = env
        .call(
            "edit_file",
            json!({"path": "big.txt", "old": "OLD", "new": "NEW"}),
        )
        .await;
    let m = failed(&r);
    assert!(m.contains("at most 1000 bytes"), "{m}");
    assert_eq!(
        fs::read_to_string(env.root.join("big.txt")).expect("read"),
        text
    );
}

#[tokio::test]
async fn append_file_appends_in_place_without_rewriting() {
    let env = env();
    let path = env.root.join("log.txt");
    fs::write(&path, "one\n").expect("write");
    let inode = fs::metadata(&path).expect("meta").ino();
    let r = env
        .call(
            "append_file",
            json!({"path": "log.txt", "content": "two\n"}),
        )
        .await
        .expect("append");
    assert!(r.contains("now 8 bytes"), "{r}");
    assert_eq!(fs::read_to_string(&path).expect("read"), "one\ntwo\n");
    // The same file (not a rewritten copy renamed over it): nothing was read into memory.
    assert_eq!(fs::metadata(&path).expect("meta").ino(), inode);
}

/// Peak memory stays far below the size of a 1 GiB file with a long first line (before the
/// fix `start_line=1` held the whole line: 1 GiB).
#[tokio::test]
async fn reading_a_huge_sparse_line_keeps_memory_bounded() {
    let env = env();
    let path = env.root.join("huge.txt");
    sparse(&path, &[b'x'; 9000], 1 << 30);
    let before = peak_rss_kib();
    let r = env
        .call("read_file", json!({"path": "huge.txt", "start_line": 1}))
        .await
        .expect("read");
    assert!(
        r.contains("Read on with start_line=2"),
        "{}",
        &r[r.len() - 200..]
    );
    let r = env
        .call("append_file", json!({"path": "huge.txt", "content": "z"}))
        .await
        .expect("append");
    assert!(r.contains("now 1073741825 bytes"), "{r}");
    let grown = peak_rss_kib().saturating_sub(before);
    assert!(grown < 100 * 1024, "peak RSS grew by {grown} KiB");
}

// ---------------------------------------------------------------------------------------------
// Item 6: a link swapped in between the check and the use

const ROUNDS: usize = 300;

/// Swap `root/name` (a folder or file in the workspace) with a link to `target`, atomically
/// (`renameat2(RENAME_EXCHANGE)`), in a tight loop until `stop` is set: half the time the name
/// is the real entry, half the time a link that leads outside.
fn swapper(root: PathBuf, name: &'static str, target: PathBuf, stop: Arc<AtomicBool>) {
    let real = root.join(name);
    let link = root.join(format!("{name}.link"));
    symlink(&target, &link).expect("link");
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).expect("cstring");
    let (a, b) = (c(&real), c(&link));
    let mut swapped = false;
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: plain system call with valid NUL-terminated paths.
        let r = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                libc::AT_FDCWD,
                a.as_ptr(),
                libc::AT_FDCWD,
                b.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
        assert_eq!(r, 0, "renameat2: {}", std::io::Error::last_os_error());
        swapped = !swapped;
    }
    if swapped {
        // SAFETY: as above; put the real entry back.
        unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                libc::AT_FDCWD,
                a.as_ptr(),
                libc::AT_FDCWD,
                b.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_a_folder_swap_never_reads_or_writes_outside() {
    let env = env();
    fs::create_dir(env.root.join("d")).expect("mkdir");
    fs::write(env.root.join("d/f.txt"), "inside\n").expect("write");
    fs::write(env.outside.join("f.txt"), "SECRET outside\n").expect("write");
    let stop = Arc::new(AtomicBool::new(false));
    let t = {
        let (root, outside, stop) = (env.root.clone(), env.outside.clone(), Arc::clone(&stop));
        std::thread::spawn(move || swapper(root, "d", outside, stop))
    };
    let (mut read_ok, mut escapes) = (0, 0);
    for i in 0..ROUNDS {
        match env.call("read_file", json!({"path": "d/f.txt"})).await {
            Ok(text) if text.contains("SECRET") => {
                eprintln!("read escaped: {text}");
                escapes += 1
            }
            Ok(_) => read_ok += 1,
            Err(_) => {}
        }
        let _ = env
            .call(
                "write_file",
                json!({"path": format!("d/w{i}.txt"), "content": "planted"}),
            )
            .await;
        let _ = env
            .call("search_files", json!({"pattern": "SECRET", "path": "d"}))
            .await
            .map(|r| {
                if r.contains("SECRET outside") {
                    eprintln!("search escaped: {r}");
                    escapes += 1;
                }
            });
    }
    stop.store(true, Ordering::Relaxed);
    t.join().expect("swapper");
    let leaked: Vec<_> = fs::read_dir(&env.outside)
        .expect("read outside")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .filter(|n| n != "f.txt")
        .collect();
    eprintln!(
        "folder race: {read_ok} of {ROUNDS} reads went through inside, {escapes} read escapes, {} files written outside",
        leaked.len()
    );
    assert_eq!(escapes, 0, "reads escaped the workspace");
    assert!(leaked.is_empty(), "writes escaped: {leaked:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_a_file_swap_never_reads_or_edits_outside() {
    let env = env();
    fs::create_dir(env.root.join("d")).expect("mkdir");
    fs::write(env.root.join("d/f.txt"), "inside old\n").expect("write");
    let secret = env.outside.join("secret");
    fs::create_dir(&secret).expect("mkdir");
    fs::write(secret.join("f.txt"), "SECRET old\n").expect("write");
    let stop = Arc::new(AtomicBool::new(false));
    // Swap the file itself: `d/f.txt` becomes a link to the outside file and back.
    let t = {
        let (root, stop) = (env.root.join("d"), Arc::clone(&stop));
        let target = secret.join("f.txt");
        std::thread::spawn(move || swapper(root, "f.txt", target, stop))
    };
    let mut escapes = 0;
    for _ in 0..ROUNDS {
        if let Ok(text) = env.call("read_file", json!({"path": "d/f.txt"})).await
            && text.contains("SECRET")
        {
            escapes += 1;
        }
        if let Ok(r) = env
            .call("search_files", json!({"pattern": "SECRET", "path": "d"}))
            .await
            && r.contains("SECRET old")
        {
            escapes += 1;
        }
    }
    // Then writes: an append through the link would change the outside file (or copy it in).
    for _ in 0..ROUNDS {
        let _ = env
            .call("append_file", json!({"path": "d/f.txt", "content": "x"}))
            .await;
    }
    stop.store(true, Ordering::Relaxed);
    t.join().expect("swapper");
    eprintln!("file race: {escapes} escapes in {ROUNDS} reads and {ROUNDS} searches");
    assert_eq!(escapes, 0, "reads escaped the workspace");
    assert_eq!(
        fs::read_to_string(secret.join("f.txt")).expect("read"),
        "SECRET old\n",
        "an append escaped the workspace"
    );
    let inside = fs::read_to_string(env.root.join("d/f.txt")).expect("read");
    assert!(inside.starts_with("inside old\n"), "{inside}");
    assert!(
        !inside.contains("SECRET"),
        "an append copied the outside file in"
    );
}

// ---------------------------------------------------------------------------------------------
// Item 12: modes and trailing slashes

#[tokio::test]
async fn new_files_follow_the_umask_and_replaced_files_keep_their_mode() {
    let env = env();
    // What any other program gets here: 0666 & !umask.
    let probe = env.root.join("probe");
    fs::File::create(&probe).expect("create");
    let expected = fs::metadata(&probe).expect("meta").permissions().mode() & 0o777;
    env.call("write_file", json!({"path": "new.txt", "content": "x"}))
        .await
        .expect("write");
    env.call("append_file", json!({"path": "app.txt", "content": "x"}))
        .await
        .expect("append");
    for name in ["new.txt", "app.txt"] {
        let mode = fs::metadata(env.root.join(name))
            .expect("meta")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, expected, "{name}: {mode:o} vs {expected:o}");
    }
    let script = env.root.join("run.sh");
    fs::write(&script, "echo hi\n").expect("write");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o751)).expect("chmod");
    env.call(
        "edit_file",
        json!({"path": "run.sh", "old": "hi", "new": "ho"}),
    )
    .await
    .expect("edit");
    let mode = fs::metadata(&script).expect("meta").permissions().mode() & 0o7777;
    assert_eq!(mode, 0o751, "{mode:o}");
}

#[tokio::test]
async fn a_trailing_slash_names_a_folder_and_file_tools_refuse_it() {
    let env = env();
    fs::write(env.root.join("notes.txt"), "hello\n").expect("write");
    let r = env.call("read_file", json!({"path": "notes.txt/"})).await;
    assert!(failed(&r).contains("names a folder"), "{r:?}");
    let r = env
        .call("write_file", json!({"path": "newdir/x/", "content": "x"}))
        .await;
    assert!(failed(&r).contains("names a folder"), "{r:?}");
    assert!(!env.root.join("newdir").exists());
    let r = env
        .call("append_file", json!({"path": "notes.txt/", "content": "x"}))
        .await;
    failed(&r);
    let r = env
        .call(
            "edit_file",
            json!({"path": "notes.txt/", "old": "hello", "new": "bye"}),
        )
        .await;
    failed(&r);
    assert_eq!(
        fs::read_to_string(env.root.join("notes.txt")).expect("read"),
        "hello\n"
    );
}
