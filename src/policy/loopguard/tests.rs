//! The loop guard's rules, one call at a time.

use super::*;
use serde_json::json;

fn key(tool: &str, v: Value) -> CallKey {
    CallKey::new(tool, v.as_object().unwrap())
}

/// Record `k` with the result `r`.
fn ran(g: &mut LoopGuard, k: &CallKey, r: &str) {
    g.record(k.clone(), r.to_string())
}

#[test]
fn normalised_arguments_compare_equal() {
    assert_eq!(
        key("t", json!({"a": 1, "b": " x"})),
        key("t", json!({"b": "x", "a": 1}))
    );
    assert_ne!(key("t", json!({"a": 1})), key("u", json!({"a": 1})));
}

#[test]
fn third_identical_call_is_blocked_then_stops() {
    let mut g = LoopGuard::default();
    let a = key("read", json!({"p": "x"}));
    for _ in 1..=2 {
        assert_eq!(g.check(&a), Check::Run);
        ran(&mut g, &a, "R");
    }
    assert!(matches!(g.check(&a), Check::Blocked { earlier, .. } if earlier == "R"));
    assert_eq!(g.check(&a), Check::EndRun);
}

#[test]
fn abab_cycle_is_blocked() {
    let mut g = LoopGuard::default();
    let a = key("a", json!({}));
    let b = key("b", json!({}));
    for (step, k) in [&a, &b, &a].into_iter().enumerate() {
        assert_eq!(g.check(k), Check::Run);
        ran(&mut g, k, &format!("r{step}"));
    }
    assert!(matches!(g.check(&b), Check::Blocked { .. }));
    // Doing something else clears the block.
    let c = key("c", json!({}));
    assert_eq!(g.check(&c), Check::Run);
}

#[test]
fn two_identical_calls_are_fine() {
    let mut g = LoopGuard::default();
    let a = key("a", json!({}));
    assert_eq!(g.check(&a), Check::Run);
    ran(&mut g, &a, "r");
    assert_eq!(g.check(&a), Check::Run);
}

#[test]
fn a_cycle_of_four_is_left_to_the_step_limit() {
    // Reading four files, then all four again: neither rule sees a cycle longer than two.
    let mut g = LoopGuard::default();
    let files: Vec<CallKey> = (1..=4)
        .map(|i| key("read_file", json!({"path": format!("week{i}.txt")})))
        .collect();
    for round in 0..2 {
        for (i, k) in files.iter().enumerate() {
            assert_eq!(g.check(k), Check::Run, "round {round}, file {i}");
            ran(&mut g, k, &format!("week {i}"));
        }
    }
}

#[test]
fn the_guard_remembers_a_bounded_number_of_calls() {
    let mut g = LoopGuard::default();
    for i in 0..(REMEMBERED as u32 * 3) {
        ran(&mut g, &key("a", json!({"i": i})), "r");
    }
    assert_eq!(g.ran.len(), REMEMBERED);
    // The oldest went first: the newest is the last call recorded.
    let last = key("a", json!({"i": REMEMBERED as u32 * 3 - 1}));
    assert_eq!(g.ran.back().map(|r| &r.key), Some(&last));
}
