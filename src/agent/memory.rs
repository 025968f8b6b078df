//! What a run remembers that changes what its loop does, as a fold over its own events.
//!
//! The files the question names and which calls used them (`named.rs`), final answers refused
//! in a row and for names, the loop guard's calls and results (`crate::policy::LoopGuard`),
//! whether the decision step has judged (`first_call.rs`), and what the next turn may do after
//! the last step: none of it is kept beside the transcript. [`Memory::apply`] reads each event
//! as the run emits it (`Run::emit`), and a continued run applies the committed events of its
//! transcript first (`Resume::events`), so a run killed at any step and continued remembers
//! exactly what it would have remembered had it not been killed. The loop only reads this
//! state; it changes it by emitting an event.
//!
//! A transcript written before tool results were recorded (`ToolFinished::result`) has no
//! result to show again: its call is not remembered by the loop guard. One written while the
//! deleted `echo` and `given` guards read what the run had been told holds nothing more than
//! the events read here, so it continues as any other.

use serde_json::Map;

use crate::policy::{CallKey, Check, LoopGuard, QuestionNames};

use super::events::Event;

/// The correction kind of an answer refused for the files the question names (`decide.rs`).
pub(crate) const NAMED_FILES_KIND: &str = "named_files";

/// A run's memory (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Memory {
    /// The files the question names, and which a call has used.
    pub(crate) named: QuestionNames,
    /// Final answers refused in a row (reset when a step is counted).
    pub(crate) refusals: u32,
    /// Final answers refused because the question names files no call has used.
    pub(crate) named_refusals: u32,
    /// The decision step has judged this run's first call.
    pub(crate) decided: bool,
    pub(crate) guard: LoopGuard,
    /// The model has shown that it reasons first (a turn began with `<think>`).
    pub(crate) reasoning: bool,
    /// The last step's call was refused by the loop guard: the next turn may only answer.
    pub(crate) after_refused_call: bool,
    steps: u32,
    started: bool,
    last_call: Option<CallKey>,
    check: Option<Check>,
    refused_call: bool,
}

impl Memory {
    /// Take in one event of the run (emitted now, or read back from its transcript).
    pub(crate) fn apply(&mut self, event: &Event) {
        match event {
            Event::RunStarted { task, question, .. } => {
                if !self.started {
                    self.started = true;
                    self.named = QuestionNames::of(task);
                }
                if let Some(q) = question {
                    // A follow-up question starts afresh.
                    *self = Memory {
                        named: QuestionNames::of(q),
                        steps: self.steps,
                        started: true,
                        reasoning: self.reasoning,
                        ..Memory::default()
                    };
                }
            }
            Event::TurnFinished { text, .. } => {
                let head = text.trim_start().as_bytes();
                self.reasoning |= head.len() >= 7 && head[..7].eq_ignore_ascii_case(b"<think>");
            }
            Event::Action { tool, args } => {
                let empty = Map::new();
                let args = args.as_object().unwrap_or(&empty);
                self.named.mark_used(args);
                let key = CallKey::new(tool, args);
                let check = self.guard.check(&key);
                self.refused_call |= matches!(check, Check::Blocked { .. });
                self.check = Some(check);
                self.last_call = Some(key);
            }
            // Without a result (an old transcript) the call is not remembered.
            Event::ToolFinished {
                result: Some(text), ..
            } => {
                if let Some(key) = self.last_call.take() {
                    self.guard.record(key, text.clone());
                }
            }
            Event::Correction { kind, .. } => match kind.as_str() {
                "parse_error" | "unknown_tool" | "bad_arguments" => self.guard.clear_block(),
                "invalid_final" | "empty_final" | NAMED_FILES_KIND => {
                    self.guard.clear_block();
                    self.refusals += 1;
                    self.named_refusals += u32::from(kind == NAMED_FILES_KIND);
                }
                _ => {}
            },
            Event::Decision { .. } => self.decided = true,
            Event::StepCompleted { progress } => {
                if progress.steps > self.steps {
                    self.refusals = 0;
                }
                self.steps = progress.steps;
                self.after_refused_call = std::mem::take(&mut self.refused_call);
                self.check = None;
                self.last_call = None;
            }
            _ => {}
        }
    }

    /// The loop guard's verdict on the call just announced (its `Action` event).
    pub(crate) fn take_check(&mut self) -> Check {
        self.check.take().unwrap_or(Check::Run)
    }
}
