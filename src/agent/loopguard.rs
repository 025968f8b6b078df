//! Loop detection (docs/protocol.md §1.6): the same call a third time in a row, or one that completes an
//! A/B/A/B cycle, is not run again.

use serde_json::{Map, Value};

/// The line before a result that the same call gave in the step before: the 1.5B Qwen made the
/// same search three times (the third was refused by the guard) with the answer in front of it.
pub(crate) const REPEATED: &str = "You made exactly this call in your last step and it returned the same again: calling it once more will not change it. Use this result, call a different tool, or give your final answer.";

/// A call, normalised: tool name and its bound arguments as canonical JSON (keys sorted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallKey(String);

impl CallKey {
    /// Normalise a call.
    pub(crate) fn new(tool: &str, args: &Map<String, Value>) -> Self {
        CallKey(format!(
            "{tool}:{}",
            canonical(&Value::Object(args.clone()))
        ))
    }
}

fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&m[k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        Value::String(s) => Value::String(s.trim().to_string()).to_string(),
        other => other.to_string(),
    }
}

/// What the guard says about a call the model wants to make.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Check {
    /// Run it.
    Run,
    /// Do not run it; tell the model it repeats itself, with the earlier result.
    Blocked {
        /// Why, in words for the model.
        reason: String,
        /// The result the same call gave before.
        earlier: String,
    },
    /// The model repeated a blocked call: the run ends with `loop_detected`.
    EndRun,
}

/// Remembers the calls that ran and their results.
#[derive(Debug, Default)]
pub(crate) struct LoopGuard {
    ran: Vec<(CallKey, String)>,
    blocked: Option<CallKey>,
}

impl LoopGuard {
    /// Judge the next call.
    pub(crate) fn check(&mut self, key: &CallKey) -> Check {
        if self.blocked.as_ref() == Some(key) {
            return Check::EndRun;
        }
        self.blocked = None;
        let n = self.ran.len();
        let at = |back: usize| self.ran.get(n.wrapping_sub(back)).map(|(k, _)| k);
        let third_in_a_row = n >= 2 && at(1) == Some(key) && at(2) == Some(key);
        let cycle = n >= 3 && at(2) == Some(key) && at(1) == at(3) && at(1) != Some(key);
        if third_in_a_row || cycle {
            let earlier = self
                .ran
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, r)| r.clone())
                .unwrap_or_default();
            let reason = if third_in_a_row {
                "This is the third time in a row you make exactly this call; it was not run again."
            } else {
                "You are alternating between the same two calls (A, B, A, B); this call was not run again."
            };
            self.blocked = Some(key.clone());
            return Check::Blocked {
                reason: reason.to_string(),
                earlier,
            };
        }
        Check::Run
    }

    /// Whether the call that ran last was this one and gave this same result.
    pub(crate) fn repeats_last(&self, key: &CallKey, result: &str) -> bool {
        self.ran
            .last()
            .is_some_and(|(k, r)| k == key && r == result)
    }

    /// Record a call that ran, with the text of its observation.
    pub(crate) fn record(&mut self, key: CallKey, result: String) {
        self.ran.push((key, result));
    }

    /// Forget a blocked call when the model does something else (a parse error, a final answer).
    pub(crate) fn clear_block(&mut self) {
        self.blocked = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(tool: &str, v: Value) -> CallKey {
        CallKey::new(tool, v.as_object().unwrap())
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
        for _ in 0..2 {
            assert_eq!(g.check(&a), Check::Run);
            g.record(a.clone(), "R".into());
        }
        assert!(matches!(g.check(&a), Check::Blocked { earlier, .. } if earlier == "R"));
        assert_eq!(g.check(&a), Check::EndRun);
    }

    #[test]
    fn abab_cycle_is_blocked() {
        let mut g = LoopGuard::default();
        let a = key("a", json!({}));
        let b = key("b", json!({}));
        for k in [&a, &b, &a] {
            assert_eq!(g.check(k), Check::Run);
            g.record(k.clone(), "r".into());
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
        g.record(a.clone(), "r".into());
        assert_eq!(g.check(&a), Check::Run);
    }

    #[test]
    fn a_repeat_is_the_same_call_with_the_same_result_just_before() {
        let mut g = LoopGuard::default();
        let a = key("a", json!({"p": 1}));
        assert!(!g.repeats_last(&a, "r"));
        g.record(a.clone(), "r".into());
        assert!(g.repeats_last(&a, "r"));
        assert!(!g.repeats_last(&a, "changed"));
        assert!(!g.repeats_last(&key("a", json!({"p": 2})), "r"));
        g.record(key("b", json!({})), "r".into());
        assert!(!g.repeats_last(&a, "r"));
    }
}
