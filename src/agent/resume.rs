//! Continuing a run from its transcript.
//!
//! A transcript is the run's [`Event`]s, one JSON record a line, written as they happen; a
//! `step_completed` record commits everything before it. [`Resume::from_records`] reads the
//! records back as events and keeps what was committed: the messages up to the last
//! `step_completed` or `finished` record and the counters there. What came after (a step cut
//! off by a kill) is dropped, and the continued run does it again.

use serde::Deserialize;
use serde_json::Value;

use crate::llm::{Message, Usage};

use super::events::Event;
use super::{Progress, Status};

/// What a run restores from a transcript to go on from its last complete step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resume {
    /// The messages up to the last complete step.
    pub messages: Vec<Message>,
    /// How far the run had got at its last committed step.
    pub progress: Progress,
    /// Every model request made, continuations included (a scripted model resumes from here).
    pub requests: u32,
    /// How the last run in the transcript ended, if it did.
    pub finished: Option<Status>,
    /// A new user message to add before going on.
    pub message: Option<String>,
    /// The task of the session's first run (its first `run_started` record).
    pub task: String,
    /// The `meta` of the latest `run_started` record that had one (the caller's options).
    pub meta: Value,
    /// The committed events, in order, from which the continued run rebuilds what it remembers
    /// (the files used, refusals, the loop guard, the decision step: `memory.rs`).
    pub events: Vec<Event>,
}

/// Why a transcript cannot be continued.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResumeError {
    /// No `run_started` record: not a transcript of a run.
    #[error("the transcript has no run_started record")]
    NotStarted,
    /// The run was cut off before the system prompt and the task were recorded.
    #[error("the transcript ends before the task was recorded")]
    NoTask,
    /// A `message` record does not hold a message.
    #[error("a message record is malformed: {0}")]
    BadMessage(#[source] serde_json::Error),
}

/// What resuming reads of a `finished` record's outcome (fields it lacks keep the counts of the
/// last committed step).
#[derive(Debug, Default, Deserialize)]
struct Ended {
    status: Option<Status>,
    steps: Option<u32>,
    llm_calls: Option<u32>,
    tools_used: Option<Vec<String>>,
    usage: Option<Usage>,
}

impl Resume {
    /// Restore from transcript records: messages up to the last `step_completed` or `finished`
    /// record; anything after it (a step cut off by a kill) is dropped and done again. Records
    /// of kinds this version does not know are skipped.
    pub fn from_records(records: &[Value]) -> Result<Resume, ResumeError> {
        let mut resume = Resume::default();
        let mut pending: Vec<Message> = Vec::new();
        let mut pending_events: Vec<Event> = Vec::new();
        // The first run's start and its first two messages (system prompt, task): what a run
        // killed before its first committed step goes on from.
        let mut head: Vec<Event> = Vec::new();
        let mut requests_pending = 0u32;
        let mut started = false;
        for record in records {
            let event = match Event::deserialize(record) {
                Ok(e) => e,
                Err(e) if record.get("type").and_then(Value::as_str) == Some("message") => {
                    return Err(ResumeError::BadMessage(e));
                }
                Err(_) => continue,
            };
            let committed = matches!(event, Event::StepCompleted { .. } | Event::Finished { .. });
            if matches!(event, Event::RunStarted { .. }) && started {
                // As with the messages below: what was not committed is done again, and the
                // first run's start stays while nothing was committed.
                pending_events = if resume.events.is_empty() {
                    head.clone()
                } else {
                    Vec::new()
                };
            }
            if head.len() < 3 && matches!(event, Event::RunStarted { .. } | Event::Message { .. }) {
                head.push(event.clone());
            }
            pending_events.push(event.clone());
            if committed {
                resume.events.append(&mut pending_events);
            }
            match event {
                Event::RunStarted { task, meta, .. } if !started => {
                    resume.task = task;
                    resume.meta = meta;
                    started = true;
                }
                Event::RunStarted { meta, .. } => {
                    // A later run (`continue`) goes on from the last commit: what an earlier run
                    // left uncommitted (a step cut off by a kill) was done again, not kept. The
                    // first two messages (system prompt, task) stay if nothing was committed yet.
                    if resume.messages.is_empty() {
                        pending.truncate(2);
                    } else {
                        pending.clear();
                    }
                    requests_pending = 0;
                    if !meta.is_null() {
                        resume.meta = meta;
                    }
                }
                Event::Message { message } => pending.push(message),
                Event::TurnFinished { .. } => requests_pending += 1,
                Event::StepCompleted { progress } => {
                    resume.messages.append(&mut pending);
                    resume.progress = progress;
                    resume.requests += std::mem::take(&mut requests_pending);
                    resume.finished = None;
                }
                Event::Finished { outcome } => {
                    resume.messages.append(&mut pending);
                    resume.requests += std::mem::take(&mut requests_pending);
                    let ended = Ended::deserialize(&outcome).unwrap_or_default();
                    let p = &mut resume.progress;
                    p.steps = ended.steps.unwrap_or(p.steps);
                    p.llm_calls = ended.llm_calls.unwrap_or(p.llm_calls);
                    if let Some(t) = ended.tools_used {
                        p.tools_used = t;
                    }
                    if let Some(u) = ended.usage {
                        p.usage = u;
                    }
                    resume.finished = ended.status;
                }
                _ => {}
            }
        }
        if !started {
            return Err(ResumeError::NotStarted);
        }
        if resume.messages.len() < 2 {
            // Killed before the first step completed: start over from the system prompt and task.
            resume.messages = pending.into_iter().take(2).collect();
            resume.events = head;
        }
        if resume.messages.len() < 2 {
            return Err(ResumeError::NoTask);
        }
        Ok(resume)
    }
}
