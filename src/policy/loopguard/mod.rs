//! Loop detection (docs/protocol.md §1.6): the same call a third time in a row, or one that
//! completes an A/B/A/B cycle, is not run again, and the model is shown the earlier result; the
//! same call once more ends the run. This is the protocol's, not a policy: without it a run that
//! loops ends only at the step limit.
//!
//! (The `same-result` policy, a note on a call that gave what it gave at an earlier step and,
//! at the second such call, a request for the answer, lived here; on the agent's validation
//! split it changed no total on either Qwen model and was deleted: docs/experiments.md.)

use std::collections::VecDeque;

use serde_json::{Map, Value};

/// How many of the latest calls the guard remembers: the three a check reads (A/A/A, A/B/A/B),
/// whose results a refused call is shown. A cycle longer than two calls is left to the step limit.
const REMEMBERED: usize = 3;

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

struct Ran {
    key: CallKey,
    text: String,
}

/// Remembers the latest calls that ran and their results.
#[derive(Default)]
pub(crate) struct LoopGuard {
    ran: VecDeque<Ran>,
    blocked: Option<CallKey>,
}

impl std::fmt::Debug for LoopGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopGuard")
            .field("remembered", &self.ran.len())
            .finish_non_exhaustive()
    }
}

impl LoopGuard {
    /// Judge the next call.
    pub(crate) fn check(&mut self, key: &CallKey) -> Check {
        if self.blocked.as_ref() == Some(key) {
            return Check::EndRun;
        }
        self.blocked = None;
        let n = self.ran.len();
        let at = |back: usize| {
            n.checked_sub(back)
                .and_then(|i| self.ran.get(i))
                .map(|r| &r.key)
        };
        let third_in_a_row = n >= 2 && at(1) == Some(key) && at(2) == Some(key);
        let cycle = n >= 3 && at(2) == Some(key) && at(1) == at(3) && at(1) != Some(key);
        if !(third_in_a_row || cycle) {
            return Check::Run;
        }
        let earlier = (self.ran.iter().rev().find(|r| r.key == *key))
            .map(|r| r.text.clone())
            .unwrap_or_default();
        let reason = if third_in_a_row {
            "This is the third time in a row you make exactly this call; it was not run again."
        } else {
            "You are alternating between the same two calls (A, B, A, B); this call was not run again."
        };
        self.blocked = Some(key.clone());
        Check::Blocked {
            reason: reason.to_string(),
            earlier,
        }
    }

    /// Record a call that ran, with `text`, the tool's part of its observation (what a blocked
    /// repeat of it is shown).
    pub(crate) fn record(&mut self, key: CallKey, text: String) {
        if self.ran.len() == REMEMBERED {
            self.ran.pop_front();
        }
        self.ran.push_back(Ran { key, text });
    }

    /// Forget a blocked call when the model does something else (a parse error, a final answer).
    pub(crate) fn clear_block(&mut self) {
        self.blocked = None;
    }
}

#[cfg(test)]
mod tests;
