//! Golden tests: every case in `tests/golden/cases/*.txt` (the shared corpus copied in, plus one or
//! more cases per docs/protocol.md §1.1–1.2 rule) is read with `parse_report` and compared with its committed
//! insta snapshot. A `NAME.tools` file next to a case holds `--tool` signatures, one per line.
//!
//! The shared corpus itself is also run, when it sits beside the repository (`../shared`), and
//! compared with its `expect` objects the way `check-corpus` does.

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tagloop::protocol::{Signature, parse_report};

fn signatures_for(case: &Path) -> (Vec<String>, Vec<Signature>) {
    let tools = case.with_extension("tools");
    let lines: Vec<String> = std::fs::read_to_string(&tools)
        .map(|s| {
            s.lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let sigs = lines
        .iter()
        .map(|l| Signature::parse(l).expect("signature"))
        .collect();
    (lines, sigs)
}

#[test]
fn golden_cases() {
    insta::glob!("golden/cases/*.txt", |path| {
        let input = std::fs::read_to_string(path).expect("case file");
        let (tools, sigs) = signatures_for(path);
        let report = parse_report(&input, &sigs);
        let shown = json!({ "input": input, "tools": tools, "parse": report });
        insta::assert_json_snapshot!(shown);
    });
}

/// JSON equality where 1 == 1.0 (as check-corpus compares).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn shared_corpus() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TAGLOOP_CORPUS") {
        return Some(PathBuf::from(p));
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/turns.jsonl");
    p.exists().then_some(p)
}

#[test]
fn shared_corpus_matches_expectations() {
    let Some(path) = shared_corpus() else {
        return; // not beside the repository: nothing to check
    };
    let text = std::fs::read_to_string(&path).expect("corpus");
    let mut failures = Vec::new();
    let mut n = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        n += 1;
        let case: Value = serde_json::from_str(line).expect("corpus line");
        let id = case["id"].as_str().unwrap_or("?").to_string();
        let input = case["input"].as_str().unwrap_or_default();
        let sigs: Vec<Signature> = case["tools"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| Signature::parse(s.as_str()?).ok())
                    .collect()
            })
            .unwrap_or_default();
        let got = serde_json::to_value(parse_report(input, &sigs)).expect("report json");
        let exp = &case["expect"];
        let mut bad = Vec::new();
        if got["kind"] != exp["kind"] {
            bad.push(format!("kind {} != {}", got["kind"], exp["kind"]));
        } else {
            if exp["kind"] == "action" {
                if got["action"]["tool"] != exp["tool"] {
                    bad.push(format!("tool {} != {}", got["action"]["tool"], exp["tool"]));
                }
                if !same(&got["action"]["args"], &exp["args"]) {
                    bad.push(format!("args {} != {}", got["action"]["args"], exp["args"]));
                }
            }
            if exp["kind"] == "final" && got["final"] != exp["final"] {
                bad.push(format!("final {} != {}", got["final"], exp["final"]));
            }
            if exp["kind"] == "error"
                && (!got["error"]["offset"].is_u64()
                    || got["error"]["message"].as_str().is_none_or(str::is_empty))
            {
                bad.push("error without message and offset".to_string());
            }
            if let Some(t) = exp.get("thought")
                && got["thought"] != *t
            {
                bad.push(format!("thought {} != {}", got["thought"], t));
            }
            if exp["discarded"] == true && got["discarded"].is_null() {
                bad.push("expected discarded text".to_string());
            }
            if exp["warnings"] == true && got["warnings"].as_array().is_none_or(Vec::is_empty) {
                bad.push("expected a warning".to_string());
            }
            if let Some(r) = exp["reasoning_contains"].as_str()
                && !got["reasoning"].as_str().unwrap_or_default().contains(r)
            {
                bad.push(format!("reasoning lacks {r:?}"));
            }
        }
        if !bad.is_empty() {
            failures.push(format!("{id}: {}", bad.join("; ")));
        }
    }
    assert!(n > 0, "empty corpus at {}", path.display());
    assert_eq!(failures, Vec::<String>::new());
}
