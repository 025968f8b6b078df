//! Unit tests of the toolkit's pure helpers (the tools themselves: tests/tools_builtin.rs).

use super::kinds::*;
use super::write::*;
use super::*;

#[test]
fn unique_match_finds_offsets_and_counts_overlaps() {
    assert_eq!(find_unique("abc", "b", "f").ok(), Some(1));
    let e = find_unique("aaa", "aa", "f").unwrap_err();
    assert!(e.to_string().contains("matches 2 times"), "{e}");
    let e = find_unique("x\ny\nx", "x", "f").unwrap_err();
    assert!(e.to_string().contains("lines 1, 3"), "{e}");
    assert!(matches!(
        find_unique("abc", "", "f"),
        Err(ToolError::Refused(_))
    ));
}

#[test]
fn schemas_keep_spec_order() {
    let p = Kind::ReadFile.parameters();
    let keys: Vec<&String> = p["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["path", "start_line", "end_line"]);
    let p = Kind::EditFile.parameters();
    let keys: Vec<&String> = p["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["path", "old", "new"]);
}
