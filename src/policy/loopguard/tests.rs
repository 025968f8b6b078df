//! The loop guard's rules, one call at a time.

use super::*;
use serde_json::json;

fn key(tool: &str, v: Value) -> CallKey {
    CallKey::new(tool, v.as_object().unwrap())
}

/// Record `k` at `step` with the result `r`.
fn ran(g: &mut LoopGuard, k: &CallKey, r: &str, step: u32) -> Option<Again> {
    g.record(k.clone(), fingerprint(r), r.to_string(), step, false)
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
    for step in 1..=2 {
        assert_eq!(g.check(&a), Check::Run);
        ran(&mut g, &a, "R", step);
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
        ran(&mut g, k, &format!("r{step}"), 1);
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
    ran(&mut g, &a, "r", 1);
    assert_eq!(g.check(&a), Check::Run);
}

#[test]
fn a_repeat_is_the_same_call_with_the_same_result_at_an_earlier_step() {
    let mut g = LoopGuard::default();
    let a = key("a", json!({"p": 1}));
    assert_eq!(ran(&mut g, &a, "r", 1), None);
    let again = ran(&mut g, &a, "r", 2).map(|x| (x.step, x.last));
    assert_eq!(again, Some((1, true)));
    // Another result is new; another argument is another call.
    assert_eq!(ran(&mut g, &a, "changed", 3), None);
    assert_eq!(ran(&mut g, &key("a", json!({"p": 2})), "r", 4), None);
    // Not the step before: the latest earlier step with that result.
    let again = ran(&mut g, &a, "r", 5).map(|x| (x.step, x.last));
    assert_eq!(again, Some((2, false)));
}

#[test]
fn a_cycle_of_four_asks_for_the_answer_at_its_second_repeat_then_ends() {
    let mut g = LoopGuard::default();
    let files: Vec<CallKey> = (1..=4)
        .map(|i| key("read_file", json!({"path": format!("week{i}.txt")})))
        .collect();
    for (i, k) in files.iter().enumerate() {
        assert_eq!(g.check(k), Check::Run);
        assert_eq!(ran(&mut g, k, &format!("week {i}"), i as u32 + 1), None);
    }
    assert_eq!(g.check(&files[0]), Check::Run);
    let first = ran(&mut g, &files[0], "week 0", 5).expect("a repeat");
    assert!(!first.answer_now);
    assert!(first.note().contains("at step 1"), "{}", first.note());
    assert_eq!(g.check(&files[1]), Check::Run);
    let second = ran(&mut g, &files[1], "week 1", 6).expect("a repeat");
    assert!(second.answer_now);
    assert!(second.note().contains("Give your final answer now"));
    // Asked for the answer, a call made before is not run; the next one ends the run.
    assert!(matches!(g.check(&files[2]), Check::Blocked { earlier, .. } if earlier == "week 2"));
    assert_eq!(g.check(&files[3]), Check::EndRun);
}

#[test]
fn a_new_call_after_the_answer_was_asked_for_still_runs() {
    let mut g = LoopGuard::default();
    let a = key("a", json!({}));
    let b = key("b", json!({}));
    ran(&mut g, &a, "r", 1);
    ran(&mut g, &b, "s", 2);
    ran(&mut g, &a, "r", 3);
    assert!(ran(&mut g, &b, "s", 4).is_some_and(|x| x.answer_now));
    assert_eq!(g.check(&key("c", json!({}))), Check::Run);
}

#[test]
fn with_names_left_the_answer_is_asked_for_one_repeat_later() {
    let mut g = LoopGuard::default();
    let a = key("a", json!({}));
    let with_names = |g: &mut LoopGuard, step| {
        g.record(a.clone(), fingerprint("r"), "r".into(), step, true)
            .map(|x| x.answer_now)
    };
    assert_eq!(with_names(&mut g, 1), None);
    assert_eq!(with_names(&mut g, 3), Some(false));
    assert_eq!(with_names(&mut g, 5), Some(false));
    assert_eq!(with_names(&mut g, 7), Some(true));
}

#[test]
fn the_guard_remembers_a_bounded_number_of_calls() {
    let mut g = LoopGuard::default();
    for i in 0..(REMEMBERED as u32 * 3) {
        ran(&mut g, &key("a", json!({"i": i})), "r", i + 1);
    }
    assert_eq!(g.ran.len(), REMEMBERED);
    // The oldest is forgotten: calling it again is new.
    assert_eq!(ran(&mut g, &key("a", json!({"i": 0})), "r", 999), None);
}
