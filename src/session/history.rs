//! What the records of a transcript commit: the steps, and the damaged lines that leave a hole
//! in that history.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use super::Loaded;

/// A damaged line inside the committed history of a transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hole {
    /// The damaged line (from 1).
    pub line: usize,
    /// The step whose commit record comes after it: the first step whose history is incomplete.
    pub step: u64,
}

/// What this module reads of a transcript record: the kinds that start a run or commit
/// progress, with the fields it needs (every other kind, and a record that does not fit, is
/// `Other`). The agent writes the records; reading them here keeps `session` below `agent`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Record {
    RunStarted {
        #[serde(default)]
        task: String,
        #[serde(default)]
        started: String,
    },
    StepCompleted {
        steps: Option<u64>,
    },
    Finished {
        #[serde(default)]
        outcome: Ended,
    },
    #[default]
    #[serde(other)]
    Other,
}

/// What this module reads of a `finished` record's outcome.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct Ended {
    pub(super) status: Option<String>,
    pub(super) steps: Option<u64>,
}

/// The `type` of a record, borrowed from its line when it has no escapes.
#[derive(Deserialize)]
struct Kind<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
}

/// The fields of a `run_started` line (as [`Record::RunStarted`]).
#[derive(Deserialize)]
struct StartedLine {
    #[serde(default)]
    task: String,
    #[serde(default)]
    started: String,
}

/// The field of a `step_completed` line.
#[derive(Deserialize)]
struct StepLine {
    steps: Option<u64>,
}

/// The field of a `finished` line.
#[derive(Deserialize)]
struct FinishedLine {
    #[serde(default)]
    outcome: Ended,
}

impl Record {
    pub(super) fn read(value: &Value) -> Record {
        <Record as serde::Deserialize>::deserialize(value).unwrap_or_default()
    }

    /// Read a record straight from its line of JSON, building only the fields it keeps.
    ///
    /// `Record`'s own `Deserialize` (an internally tagged enum) first buffers the whole record
    /// in memory to find its `type`, which for a 40 MB line of small values costs gigabytes. Here
    /// the line is read twice instead: once for `type` alone, and, for the three kinds this
    /// module reads, once for their fields. Every other field is skipped as it is parsed
    /// (serde's `IgnoredAny`, which the derived structs use for unknown fields) and never built.
    /// A line that is not JSON, or does not fit its kind, is `Other`, as with [`Record::read`].
    pub(super) fn from_line(line: &[u8]) -> Record {
        let Ok(Kind { kind }) = serde_json::from_slice::<Kind>(line) else {
            return Record::Other;
        };
        let record = match kind.as_ref() {
            "run_started" => {
                serde_json::from_slice::<StartedLine>(line).map(|l| Record::RunStarted {
                    task: l.task,
                    started: l.started,
                })
            }
            "step_completed" => serde_json::from_slice::<StepLine>(line)
                .map(|l| Record::StepCompleted { steps: l.steps }),
            "finished" => serde_json::from_slice::<FinishedLine>(line)
                .map(|l| Record::Finished { outcome: l.outcome }),
            _ => return Record::Other,
        };
        record.unwrap_or_default()
    }

    /// The step a commit record commits (a `finished` record commits the last one).
    fn committed_step(&self) -> Option<u64> {
        match self {
            Record::StepCompleted { steps } => Some(steps.unwrap_or(0)),
            Record::Finished { outcome } => Some(outcome.steps.unwrap_or(0)),
            _ => None,
        }
    }
}

/// The damaged lines of `loaded` that leave a hole in its committed history, in file order.
///
/// A damaged line is a hole when the next record that commits or starts a run after it is a
/// commit (`step_completed` or `finished`): that commit covers the lost record. When it is a
/// `run_started` (a `continue`), or there is none (the end of the file), the line belonged to work
/// that was never committed, which a continued run redoes anyway.
pub fn holes(loaded: &Loaded) -> Vec<Hole> {
    let mut out = Vec::new();
    for d in &loaded.damaged {
        let next = loaded.records.iter().skip(d.before).find_map(|r| {
            let record = Record::read(r);
            match record {
                Record::RunStarted { .. } => Some(None),
                _ => record.committed_step().map(Some),
            }
        });
        if let Some(Some(step)) = next {
            out.push(Hole {
                line: d.line,
                step: step.max(1),
            });
        }
    }
    out
}

/// How many of `records` make up the history through step `step`: everything up to and including
/// the first `step_completed` record of that step. Step 0 is the start: the records before the
/// first step was committed. `None` when no step `step` was committed.
pub fn records_through_step(records: &[Value], step: u64) -> Option<usize> {
    if step == 0 {
        return Some(
            records
                .iter()
                .position(|r| Record::read(r).committed_step().is_some())
                .unwrap_or(records.len()),
        );
    }
    records
        .iter()
        .position(
            |r| matches!(Record::read(r), Record::StepCompleted { steps: Some(s) } if s == step),
        )
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_read_from_its_line_is_the_record_read_from_its_value() {
        for line in [
            r#"{"type":"run_started","task":"t\u00e9","started":"2026","meta":{"x":[1,2]}}"#,
            r#"{"type":"run_started"}"#,
            r#"{"type":"run_started","task":3}"#,
            r#"{"type":"step_completed","steps":4,"big":[0,0,0]}"#,
            r#"{"type":"step_completed"}"#,
            r#"{"type":"finished","outcome":{"status":"ok","steps":2,"final":{"a":1}}}"#,
            r#"{"type":"finished","outcome":7}"#,
            r#"{"type":"message","message":{"content":"x"}}"#,
            r#"{"type":5}"#,
            r#"{"no_type":1}"#,
        ] {
            let value: Value = serde_json::from_str(line).unwrap();
            assert_eq!(
                format!("{:?}", Record::from_line(line.as_bytes())),
                format!("{:?}", Record::read(&value)),
                "{line}"
            );
        }
        for bad in ["", "{bad", "[1]", "{\"type\":\"finished\"} trailing"] {
            assert!(
                matches!(Record::from_line(bad.as_bytes()), Record::Other),
                "{bad}"
            );
        }
    }
    use crate::session::read::read_records;
    use std::path::Path;

    fn lines(text: &str) -> Loaded {
        read_records(Path::new("t.jsonl"), text.as_bytes()).unwrap()
    }

    #[test]
    fn a_damaged_line_is_a_hole_only_when_a_later_commit_covers_it() {
        let start = r#"{"type":"run_started","task":"t"}"#;
        let msg = r#"{"type":"message"}"#;
        let step = |n: u32| format!(r#"{{"type":"step_completed","steps":{n}}}"#);
        let fin = r#"{"type":"finished","outcome":{"status":"ok","steps":3}}"#;
        // Inside step 2: a hole named by the step that committed it.
        let text = [start, msg, &step(1), msg, "{bad", &step(2), fin].join("\n");
        let loaded = lines(&text);
        assert_eq!(holes(&loaded), vec![Hole { line: 5, step: 2 }]);
        // Inside the last, uncommitted step, then a continuation started: no hole.
        let text = [start, &step(1), msg, "{bad", start, msg, &step(2)].join("\n");
        assert_eq!(holes(&lines(&text)), vec![]);
        // Covered by the final record.
        let text = [start, &step(1), "{bad", fin].join("\n");
        assert_eq!(holes(&lines(&text)), vec![Hole { line: 3, step: 3 }]);
    }

    #[test]
    fn records_through_a_step_end_at_its_commit() {
        let loaded = lines(
            r#"{"type":"run_started"}
{"type":"message"}
{"type":"step_completed","steps":1}
{"type":"message"}
{"type":"step_completed","steps":2}
{"type":"message"}"#,
        );
        let r = &loaded.records;
        assert_eq!(records_through_step(r, 0), Some(2));
        assert_eq!(records_through_step(r, 1), Some(3));
        assert_eq!(records_through_step(r, 2), Some(5));
        assert_eq!(records_through_step(r, 3), None);
    }
}
