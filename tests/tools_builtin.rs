//! Every built-in tool that reads, and the gates: success cases and each refusal of
//! `read_file`, `list_dir` and `search_files`, which tools the options make exist, their schemas.
//! The tools that change things, confirm mode and `run_command` are in tools_write.rs.

mod common;

use std::fs;

use serde_json::json;
use tagloop::tools::{Limits, ToolkitOptions};

use common::tools::{env_rw, env_with, failed};

#[test]
fn gates_decide_which_tools_exist() {
    let names = |o: ToolkitOptions| {
        env_with(o)
            .reg
            .names()
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(ToolkitOptions::default()),
        ["read_file", "list_dir", "search_files"]
    );
    assert_eq!(
        names(ToolkitOptions {
            allow_write: true,
            ..ToolkitOptions::default()
        }),
        [
            "read_file",
            "list_dir",
            "search_files",
            "write_file",
            "append_file",
            "edit_file",
            "make_dir",
            "move_path",
            "delete_path"
        ]
    );
    assert_eq!(
        names(ToolkitOptions {
            allow_shell: true,
            ..ToolkitOptions::default()
        }),
        ["read_file", "list_dir", "search_files", "run_command"]
    );
}

#[test]
fn schemas_follow_the_spec() {
    let env = env_rw();
    let expect: &[(&str, &[&str], &[&str])] = &[
        ("read_file", &["path", "start_line", "end_line"], &["path"]),
        ("list_dir", &["path", "recursive"], &[]),
        ("search_files", &["pattern", "path"], &["pattern"]),
        ("write_file", &["path", "content"], &["path", "content"]),
        ("append_file", &["path", "content"], &["path", "content"]),
        (
            "edit_file",
            &["path", "old", "new"],
            &["path", "old", "new"],
        ),
        ("make_dir", &["path"], &["path"]),
        ("move_path", &["from", "to"], &["from", "to"]),
        ("delete_path", &["path"], &["path"]),
        ("run_command", &["command", "timeout_s"], &["command"]),
    ];
    for (name, props, required) in expect {
        let t = env.reg.get(name).expect("tool");
        let p = t.parameters();
        assert_eq!(p["type"], "object", "{name}");
        let keys: Vec<&str> = p["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(&keys, props, "{name}");
        assert_eq!(p["required"], json!(required), "{name}");
        assert!(
            t.description().len() > 30,
            "{name} needs a real description"
        );
    }
}

// ------------------------------------------------------------------------------------------
// read_file

#[tokio::test]
async fn read_file_whole_and_ranges() {
    let env = env_rw();
    env.write("a.txt", "one\ntwo\nthree\nfour\n");
    assert_eq!(
        env.call("read_file", json!({"path": "a.txt"})).await,
        Ok("one\ntwo\nthree\nfour\n".to_string())
    );
    assert_eq!(
        env.call(
            "read_file",
            json!({"path": "a.txt", "start_line": 2, "end_line": 3})
        )
        .await,
        Ok("two\nthree\n".to_string())
    );
    assert_eq!(
        env.call("read_file", json!({"path": "a.txt", "start_line": 3}))
            .await,
        Ok("three\nfour\n".to_string())
    );
    assert_eq!(
        env.call("read_file", json!({"path": "a.txt", "end_line": 1}))
            .await,
        Ok("one\n".to_string())
    );
    // end beyond the file is clamped; string numbers are accepted.
    assert_eq!(
        env.call(
            "read_file",
            json!({"path": "a.txt", "start_line": "4", "end_line": 99})
        )
        .await,
        Ok("four\n".to_string())
    );
    // CRLF and UTF-8 come back untouched.
    env.write("crlf.txt", "é\r\nz\r\n");
    assert_eq!(
        env.call("read_file", json!({"path": "crlf.txt"})).await,
        Ok("é\r\nz\r\n".to_string())
    );
    env.write("empty.txt", "");
    assert_eq!(
        env.call("read_file", json!({"path": "empty.txt"})).await,
        Ok("(empty file)".to_string())
    );
    // Through an absolute path inside the workspace.
    let abs = env.p("a.txt").to_string_lossy().into_owned();
    assert_eq!(
        env.call("read_file", json!({"path": abs, "end_line": 1}))
            .await,
        Ok("one\n".to_string())
    );
}

#[tokio::test]
async fn read_file_errors() {
    let env = env_rw();
    env.write("a.txt", "one\ntwo\n");
    let r = env
        .call("read_file", json!({"path": "a.txt", "start_line": 5}))
        .await;
    assert!(
        failed(&r).contains("past the end") && failed(&r).contains("2 lines"),
        "{r:?}"
    );
    let r = env
        .call(
            "read_file",
            json!({"path": "a.txt", "start_line": 2, "end_line": 1}),
        )
        .await;
    assert!(failed(&r).contains("before start_line"), "{r:?}");
    let r = env
        .call("read_file", json!({"path": "a.txt", "start_line": 0}))
        .await;
    assert!(failed(&r).contains("start_line"), "{r:?}");
    let r = env.call("read_file", json!({"path": "missing.txt"})).await;
    assert!(failed(&r).contains("not found"), "{r:?}");
    fs::create_dir(env.p("d")).expect("mkdir");
    let r = env.call("read_file", json!({"path": "d"})).await;
    assert!(failed(&r).contains("list_dir"), "{r:?}");
    fs::write(env.p("bin.dat"), [0u8, 1, 2, 3, 0, 255]).expect("write");
    let r = env.call("read_file", json!({"path": "bin.dat"})).await;
    assert!(failed(&r).contains("binary"), "{r:?}");
    let r = env.call("read_file", json!({})).await;
    assert!(failed(&r).contains("path"), "{r:?}");
}

#[tokio::test]
async fn read_file_cuts_big_files_with_a_note() {
    let env = env_with(ToolkitOptions {
        limits: Limits {
            read_max_bytes: 100,
            ..Limits::default()
        },
        ..ToolkitOptions::default()
    });
    let text: String = (1..=50).map(|i| format!("line {i:02}\n")).collect(); // 8 bytes each
    env.write("big.txt", &text);
    let out = env
        .call("read_file", json!({"path": "big.txt"}))
        .await
        .expect("ok");
    assert!(out.starts_with("line 01\n"), "{out}");
    // 100 bytes → 12 whole lines (96 bytes), then the note.
    assert!(
        out.contains("line 12\n") && !out.contains("line 13"),
        "{out}"
    );
    assert!(
        out.contains("400 bytes") && out.contains("start_line=13"),
        "{out}"
    );
    // Ranges are capped too, and say where to go on.
    let out = env
        .call("read_file", json!({"path": "big.txt", "start_line": 20}))
        .await
        .expect("ok");
    assert!(
        out.starts_with("line 20\n") && out.contains("line 31\n"),
        "{out}"
    );
    assert!(
        !out.contains("line 32") && out.contains("start_line=32"),
        "{out}"
    );
    // One line longer than the cap shows its beginning.
    env.write("long.txt", &"x".repeat(500));
    let out = env
        .call("read_file", json!({"path": "long.txt", "start_line": 1}))
        .await
        .expect("ok");
    assert!(
        out.starts_with(&"x".repeat(100)) && out.contains("cut"),
        "{out}"
    );
}

// ------------------------------------------------------------------------------------------
// list_dir

#[tokio::test]
async fn list_dir_flat_recursive_and_gitignore() {
    let env = env_rw();
    env.write("b.txt", "b");
    env.write("a.txt", "a");
    env.write("src/main.rs", "fn main() {}");
    env.write("src/deep/x.rs", "");
    env.write(".gitignore", "target/\n*.log\n");
    env.write("target/debug/out", "bin");
    env.write("app.log", "log");
    env.write(".hidden", "h");
    env.write(".git/config", "[core]");
    let out = env.call("list_dir", json!({})).await.expect("ok");
    assert_eq!(out, ".gitignore\n.hidden\na.txt\nb.txt\nsrc/");
    let out = env
        .call("list_dir", json!({"path": "."}))
        .await
        .expect("ok");
    assert_eq!(out, ".gitignore\n.hidden\na.txt\nb.txt\nsrc/");
    let out = env
        .call("list_dir", json!({"path": "src", "recursive": true}))
        .await
        .expect("ok");
    assert_eq!(out, "src/deep/\nsrc/deep/x.rs\nsrc/main.rs");
    let out = env
        .call("list_dir", json!({"recursive": true}))
        .await
        .expect("ok");
    assert!(out.contains("src/deep/x.rs"), "{out}");
    assert!(
        !out.contains("target") && !out.contains("app.log") && !out.contains(".git/"),
        "{out}"
    );
    fs::create_dir(env.p("empty")).expect("mkdir");
    let out = env
        .call("list_dir", json!({"path": "empty"}))
        .await
        .expect("ok");
    assert!(out.contains("empty"), "{out}");
}

#[tokio::test]
async fn list_dir_errors_and_cap() {
    let env = env_with(ToolkitOptions {
        limits: Limits {
            list_max_entries: 3,
            ..Limits::default()
        },
        ..ToolkitOptions::default()
    });
    for i in 0..10 {
        env.write(&format!("f{i}.txt"), "");
    }
    let out = env.call("list_dir", json!({})).await.expect("ok");
    assert!(out.starts_with("f0.txt\nf1.txt\nf2.txt\n"), "{out}");
    assert!(out.contains("cut at 3 entries"), "{out}");
    let r = env.call("list_dir", json!({"path": "f0.txt"})).await;
    assert!(failed(&r).contains("read_file"), "{r:?}");
    let r = env.call("list_dir", json!({"path": "nope"})).await;
    assert!(failed(&r).contains("not found"), "{r:?}");
}

// ------------------------------------------------------------------------------------------
// search_files

#[tokio::test]
async fn search_files_finds_lines_with_paths() {
    let env = env_rw();
    env.write("src/a.rs", "fn alpha() {}\nfn beta() {}\n");
    env.write("src/b.rs", "// alpha again\n");
    env.write("notes.md", "nothing here\nALPHA caps\n");
    env.write(".gitignore", "ignored/\n");
    env.write("ignored/c.rs", "alpha hidden\n");
    fs::write(env.p("bin.dat"), b"alpha\0binary").expect("write");
    let out = env
        .call("search_files", json!({"pattern": "alpha"}))
        .await
        .expect("ok");
    assert_eq!(out, "src/a.rs:1: fn alpha() {}\nsrc/b.rs:1: // alpha again");
    let out = env
        .call(
            "search_files",
            json!({"pattern": "(?i)alpha", "path": "notes.md"}),
        )
        .await
        .expect("ok");
    assert_eq!(out, "notes.md:2: ALPHA caps");
    let out = env
        .call(
            "search_files",
            json!({"pattern": r"fn \w+\(", "path": "src"}),
        )
        .await
        .expect("ok");
    assert_eq!(out, "src/a.rs:1: fn alpha() {}\nsrc/a.rs:2: fn beta() {}");
    let out = env
        .call("search_files", json!({"pattern": "zzz"}))
        .await
        .expect("ok");
    assert!(out.starts_with("no matches"), "{out}");
}

#[tokio::test]
async fn search_files_errors_and_cap() {
    let env = env_with(ToolkitOptions {
        limits: Limits {
            search_max_matches: 5,
            search_max_line_chars: 10,
            ..Limits::default()
        },
        ..ToolkitOptions::default()
    });
    let text: String = (0..20)
        .map(|i| format!("match number {i} is long\n"))
        .collect();
    env.write("m.txt", &text);
    let out = env
        .call("search_files", json!({"pattern": "match"}))
        .await
        .expect("ok");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("m.txt:")).count(),
        5,
        "{out}"
    );
    assert!(out.contains("m.txt:1: match numb…"), "{out}");
    assert!(out.contains("cut at 5 matches"), "{out}");
    let r = env.call("search_files", json!({"pattern": "("})).await;
    assert!(failed(&r).contains("regular expression"), "{r:?}");
    let r = env
        .call("search_files", json!({"pattern": "x", "path": "nope"}))
        .await;
    assert!(failed(&r).contains("not found"), "{r:?}");
}

#[tokio::test]
async fn a_search_for_a_path_that_matches_nothing_says_how_to_open_it() {
    let env = env_rw();
    env.write("docs/setup.md", "Run the server on port 8080.\n");
    env.write(".env", "KEY=secret\n");
    let out = env
        .call("search_files", json!({"pattern": "docs/setup.md"}))
        .await
        .expect("ok");
    assert_eq!(
        out,
        "`docs/setup.md` is a file in the workspace: read it with read_file(path=\"docs/setup.md\"). search_files looks for text inside files, and no line matches that name.\n(no matches for /docs/setup.md/ in `.`)"
    );
    // From the folder searched, and a folder is to be listed.
    let out = env
        .call(
            "search_files",
            json!({"pattern": "setup.md", "path": "docs"}),
        )
        .await
        .expect("ok");
    assert!(
        out.starts_with("`docs/setup.md` is a file in the workspace: read it with read_file(path=\"docs/setup.md\")."),
        "{out}"
    );
    let out = env
        .call("search_files", json!({"pattern": "./docs"}))
        .await
        .expect("ok");
    assert!(
        out.starts_with(
            "`docs` is a folder in the workspace: list it with list_dir(path=\"docs\")."
        ),
        "{out}"
    );
    // A pattern that names nothing, or a protected file, gets the plain answer.
    for pattern in ["zzz", ".env", "."] {
        let out = env
            .call("search_files", json!({"pattern": pattern}))
            .await
            .expect("ok");
        assert!(!out.contains("in the workspace:"), "{pattern}: {out}");
    }
}
