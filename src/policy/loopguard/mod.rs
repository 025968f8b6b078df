//! Loop detection (docs/protocol.md §1.6): the same call a third time in a row, or one that completes an
//! A/B/A/B cycle, is not run again; a call that gives what the same call gave at an earlier step is
//! said to be nothing new, and the second such call asks for the answer.

use std::collections::VecDeque;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Map, Value};

/// How many of the latest calls the guard remembers: each check looks at these only, so a run
/// of any length costs the same per call. A cycle longer than this is left to the step limit.
const REMEMBERED: usize = 32;

/// At the second call that changed nothing the model is asked for its answer; at the third, even
/// while the question names files no call has used.
const ANSWER_AT: u32 = 2;
const ANSWER_AT_WITH_NAMES_LEFT: u32 = 3;

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

/// A fingerprint of a tool's part of an observation (the header that names the call and its
/// output; not the notes around it, which change from step to step).
pub(crate) fn fingerprint(result: &str) -> u64 {
    let mut h = DefaultHasher::new();
    result.hash(&mut h);
    h.finish()
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

/// A call that ran and gave what the same call gave at an earlier step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Again {
    /// The step of the latest earlier run of the call.
    pub(crate) step: u32,
    /// That step was the one just before.
    pub(crate) last: bool,
    /// Calls that changed nothing have come often enough: the next turn may only answer.
    pub(crate) answer_now: bool,
}

impl Again {
    /// The line that opens the result (or, when the answer is asked for, closes it).
    pub(crate) fn note(&self) -> String {
        let then = if self.last {
            "You made exactly this call in your last step and it returned the same again: calling it once more will not change it.".to_string()
        } else {
            format!(
                "You made exactly this call before, at step {0}, and it returned the same then: this is no new information, and that result is still above, at step {0}.",
                self.step
            )
        };
        let next = if self.answer_now {
            "Your calls keep returning what you already have: no call will tell you more. Give your final answer now, from the results above."
        } else {
            "Use this result, call a different tool, or give your final answer."
        };
        format!("{then} {next}")
    }
}

struct Ran {
    key: CallKey,
    result: u64,
    text: String,
    step: u32,
}

/// Remembers the latest calls that ran and their results.
#[derive(Default)]
pub(crate) struct LoopGuard {
    ran: VecDeque<Ran>,
    blocked: Option<CallKey>,
    /// Calls that gave what the same call gave before.
    stale: u32,
    /// The model was asked for its answer, and how many calls it made since that were refused.
    answer_asked: Option<u32>,
    /// The `same-result` policy is off: a call that gives what it gave before is not said so,
    /// and the answer is never asked for.
    pub(crate) same_result_off: bool,
}

impl std::fmt::Debug for LoopGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopGuard")
            .field("remembered", &self.ran.len())
            .field("stale", &self.stale)
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
        let earlier = self.ran.iter().rev().find(|r| r.key == *key);
        // Asked for the answer, the model calls what it called before once more (a turn
        // without a grammar may): not run; a second such call ends the run.
        let after_ask = self.answer_asked.is_some() && earlier.is_some();
        if after_ask && self.answer_asked.is_some_and(|refused| refused >= 1) {
            return Check::EndRun;
        }
        if !(third_in_a_row || cycle || after_ask) {
            return Check::Run;
        }
        let earlier = earlier.map(|r| r.text.clone()).unwrap_or_default();
        let reason = if third_in_a_row {
            "This is the third time in a row you make exactly this call; it was not run again."
        } else if cycle {
            "You are alternating between the same two calls (A, B, A, B); this call was not run again."
        } else {
            "You were asked for your final answer, and you made this call before; it was not run again."
        };
        if let Some(refused) = self.answer_asked.as_mut() {
            *refused += u32::from(after_ask);
        }
        self.blocked = Some(key.clone());
        Check::Blocked {
            reason: reason.to_string(),
            earlier,
        }
    }

    /// Record a call that ran at `step`: `result` is the [`fingerprint`] of the tool's part of
    /// the observation, `text` that part. When the same call gave the same result before, say at
    /// which step; `names_left` is whether the question names files no call has used (the
    /// answer is then asked for one call later).
    pub(crate) fn record(
        &mut self,
        key: CallKey,
        result: u64,
        text: String,
        step: u32,
        names_left: bool,
    ) -> Option<Again> {
        let found = self
            .ran
            .iter()
            .rposition(|r| r.key == key && r.result == result);
        let last = found.is_some_and(|i| i + 1 == self.ran.len());
        let again = found.and_then(|i| self.ran.get(i)).map(|r| r.step);
        if self.ran.len() == REMEMBERED {
            self.ran.pop_front();
        }
        self.ran.push_back(Ran {
            key,
            result,
            text,
            step,
        });
        let step = again?;
        if self.same_result_off {
            return None;
        }
        self.stale += 1;
        let at = if names_left {
            ANSWER_AT_WITH_NAMES_LEFT
        } else {
            ANSWER_AT
        };
        let answer_now = self.stale >= at;
        if answer_now && self.answer_asked.is_none() {
            self.answer_asked = Some(0);
        }
        Some(Again {
            step,
            last,
            answer_now,
        })
    }

    /// Whether the model was asked for its answer (calls that changed nothing went on).
    pub(crate) fn answer_asked(&self) -> bool {
        self.answer_asked.is_some()
    }

    /// Forget a blocked call when the model does something else (a parse error, a final answer).
    pub(crate) fn clear_block(&mut self) {
        self.blocked = None;
    }
}

#[cfg(test)]
mod tests;
