//! `tagloop parse` from outside: the JSON shape and field order, exit codes (docs/protocol.md §2.1).

use assert_cmd::Command;
use pretty_assertions::assert_eq;

fn tagloop() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tagloop"))
}

#[test]
fn json_has_the_spec_fields_in_order() {
    let out = tagloop()
        .args(["parse", "--json", "--tool", "write_file(path, content)"])
        .write_stdin(
            r#"<action>write_file(path="a.html", content="<a href="x", title="y">z</a>")</action>"#,
        )
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "kind",
            "thought",
            "action",
            "final",
            "error",
            "discarded",
            "reasoning",
            "warnings",
            // tagloop's own addition after the spec's fields (docs/protocol.md §2.1).
            "dialect"
        ]
    );
    assert_eq!(
        v["action"]["args"][1]["value"],
        r#"<a href="x", title="y">z</a>"#
    );
}

#[test]
fn every_kind_exits_zero() {
    for (input, kind) in [
        ("<action>f()</action>", "action"),
        ("<final_answer>x</final_answer>", "final"),
        ("nothing", "none"),
        ("<action>f(</action>", "error"),
    ] {
        let out = tagloop()
            .args(["parse", "--json"])
            .write_stdin(input)
            .assert()
            .success();
        let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        assert_eq!(v["kind"], kind);
    }
}

#[test]
fn unreadable_input_exits_two() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, b"\xff\xfe<action>").unwrap();
    let cases: [(Vec<std::ffi::OsString>, &str); 3] = [
        (
            vec!["parse".into(), "--json".into(), bad.into()],
            "not UTF-8",
        ),
        (
            vec!["parse".into(), dir.path().join("missing.txt").into()],
            "cannot read",
        ),
        (
            vec!["parse".into(), "--tool".into(), "nope(".into()],
            "bad tool signature",
        ),
    ];
    for (args, message) in cases {
        let out = tagloop().args(&args).write_stdin("x").assert().code(2);
        let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert!(err.contains(message), "{args:?}: {err}");
        assert!(out.get_output().stdout.is_empty());
    }
}

#[test]
fn readable_output_without_colour_when_piped() {
    let out = tagloop()
        .args(["parse"])
        .write_stdin("<action>**search**(q=\"x\") trailing</action>")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(
        !text.contains('\u{1b}'),
        "no colour codes when piped: {text}"
    );
    assert!(text.contains("kind: action"));
    assert!(text.contains("q = \"x\""));
    assert!(text.contains("markdown around the tool name removed"));
    assert!(text.contains("text after the call ignored"));
}

/// `search(query="x"` closed its string and forgot the `)`: the message must name the `)`,
/// not call the string unclosed (which sends a reader hunting for a quote that is there).
#[test]
fn a_closed_string_without_its_paren_names_the_missing_paren() {
    for (input, expected) in [
        (r#"<action>search(query="x"</action>"#, "`)`"),
        (r#"<action>search(query="x"  </action>"#, "`)`"),
        (r#"<action>f(a=[1, "x"</action>"#, "`]`"),
        (r#"<action>f({"python": "print(1)"</action>"#, "`}`"),
    ] {
        let out = tagloop()
            .args(["parse", "--json"])
            .write_stdin(input)
            .assert()
            .success();
        let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(expected), "{input}: {message}");
        assert!(!message.contains("never closed"), "{input}: {message}");
        // The human view does not blame a stop string for a block the model closed itself.
        let out = tagloop().arg("parse").write_stdin(input).assert().success();
        let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
        assert!(!text.contains("open string"), "{input}: {text}");
    }
    // A string that really is open still says so.
    let out = tagloop()
        .args(["parse", "--json"])
        .write_stdin(r#"<action>search(query="x</action>"#)
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("never closed"), "{message}");
}
