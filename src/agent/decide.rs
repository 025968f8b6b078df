//! Decide: read a model turn and say what happens next.
//!
//! A turn is one of: a final answer (checked against the role: accepted, the run ends; refused,
//! the model is told why; an answer that comes while the question names files no call has used
//! yet is refused with their names, a few times a run), an action (run in `act.rs`), or neither (the model is reminded of the
//! format). A turn the degeneration guard cut is never acted on. After the step limit only a
//! final answer is accepted, once.

use serde_json::Value;

use crate::llm::{Finish, Message, Role as MsgRole};
use crate::policy::{Answering, Policy, named_refusal};
use crate::protocol::{self, Turn, TurnKind};

use super::Status;
use super::correction::{Correction, DISCARDED_NOTE};
use super::events::Event;
use super::finalcheck::{self, Verdict};
use super::next::{Ending, Next};
use super::run::Run;
use super::turn::ModelTurn;

impl Run<'_> {
    /// Read the turn and decide what happens next.
    pub(super) async fn decide(&mut self, model_turn: ModelTurn, final_only: bool) -> Next {
        let names = self.agent.tools.names();
        let mut turn = protocol::read_turn_with(&model_turn.text, &names);
        // A turn the degeneration guard cut is used only when what it kept (up to the first
        // repetition) is a final answer: the repeating tail is gone, the answer is whole. An
        // action in it may be cut short, so it never runs.
        if model_turn.finish == Finish::Repeated
            && !(turn.kind == TurnKind::Final
                && turn
                    .final_text
                    .as_deref()
                    .is_some_and(|t| !t.trim().is_empty()))
        {
            return self.repeated(&model_turn.text, final_only);
        }
        if let Some(start) = model_turn.action_start {
            protocol::continued_action(&mut turn, &model_turn.text, start);
        }
        if !final_only && self.first_call_declined(&turn).await {
            return Next::Declined;
        }
        self.keep_turn(&model_turn.text, &turn);
        if let Some(t) = &turn.thought {
            self.emit(Event::Thought { text: t.clone() });
        }
        if final_only {
            return Next::End(self.last_chance(&turn));
        }
        let mut next = match turn.kind {
            TurnKind::Final => self.final_answer(&turn),
            TurnKind::None => Next::step(self.correct(if model_turn.finish == Finish::Length {
                Correction::Truncated
            } else {
                Correction::NoDecision
            })),
            TurnKind::Action => self.act(&turn, &model_turn.finish).await,
        };
        if turn.discarded.is_some()
            && let Next::Step { observation, .. } | Next::Refused(observation) = &mut next
        {
            observation.push_str("\n\n");
            observation.push_str(DISCARDED_NOTE);
        }
        next
    }

    /// A final answer: accepted, the run ends; refused, the model is told why (and after
    /// `max_refusals` refusals in a row the run ends).
    fn final_answer(&mut self, turn: &Turn) -> Next {
        let text = turn.final_text.as_deref().unwrap_or_default();
        if let Some(refused) = self.before_named_files() {
            return refused;
        }
        match self.check_final(text) {
            Ok(value) => Next::End(Ending {
                status: Status::Ok,
                answer: Some(value),
                error: None,
            }),
            Err(why) => {
                // The correction counts the refusal in the run's memory (`memory.rs`).
                let empty = text.trim().is_empty();
                let message = self.correct(Correction::Final {
                    why: why.clone(),
                    empty,
                });
                let refusals = self.memory.refusals;
                if refusals >= self.agent.config.max_refusals {
                    return Next::End(Ending::stop(
                        Status::InvalidFinal,
                        format!("{refusals} final answers in a row were refused; the last: {why}"),
                    ));
                }
                Next::Refused(message)
            }
        }
    }

    /// The `named-files-refusal` policy (`crate::policy::named_refusal`): an answer that comes
    /// while the question names files no call has used is refused, with those names.
    fn before_named_files(&mut self) -> Option<Next> {
        if !self.agent.config.policies.on(Policy::NamedFilesRefusal) {
            return None;
        }
        let memory = &self.memory;
        let at = Answering {
            tools: self.tools_take_names(),
            refusals: memory.refusals,
            max_refusals: self.agent.config.max_refusals,
            named_refusals: memory.named_refusals,
            // After a call the loop guard refused, the turn may only answer: the runtime asked
            // for this answer.
            after_refused_call: memory.after_refused_call,
        };
        let why = named_refusal::refusal(&memory.named, at)?;
        // The correction counts the refusal in the run's memory (`memory.rs`).
        Some(Next::Refused(self.correct(Correction::NamedFiles { why })))
    }

    /// Whether a tool of the run could be given a file's name (`named_refusal::could_take_a_name`):
    /// without one, the files the question names are neither refused for nor noticed.
    pub(super) fn tools_take_names(&self) -> bool {
        self.agent
            .tools
            .iter()
            .any(|t| named_refusal::could_take_a_name(t.parameters()))
    }

    /// Check a final answer against the role; an accepted one is announced.
    fn check_final(&mut self, text: &str) -> Result<Value, String> {
        match finalcheck::check(text, &self.agent.role) {
            Verdict::Accepted { value, warnings } => {
                self.emit(Event::Final {
                    value: value.clone(),
                    warnings,
                });
                Ok(value)
            }
            Verdict::Refused(why) => Err(why),
        }
    }

    /// The turn after the step limit: only a final answer is accepted, and the run ends either way.
    /// The context window may have been what left room for this turn only.
    fn last_chance(&mut self, turn: &Turn) -> Ending {
        let (status, reason) = if self.context.final_only {
            (
                Status::ContextExceeded,
                "the context window is full (the last turn could only answer)".to_string(),
            )
        } else {
            (
                Status::MaxSteps,
                format!("the step limit of {} steps was reached", self.step_limit),
            )
        };
        if turn.kind != TurnKind::Final {
            self.correct(Correction::FinalOnly);
            return Ending::stop(status, reason);
        }
        match self.check_final(turn.final_text.as_deref().unwrap_or_default()) {
            Ok(value) => Ending {
                status,
                answer: Some(value),
                error: Some(reason),
            },
            Err(why) => {
                self.correct(Correction::Final {
                    why: why.clone(),
                    empty: false,
                });
                Ending::stop(
                    status,
                    format!("{reason}; the last answer was refused: {why}"),
                )
            }
        }
    }

    /// A turn the degeneration guard cut: nothing in it is run (an action in it may be cut
    /// short); the history keeps what was written up to the first repetition, and the model is
    /// told plainly what happened.
    fn repeated(&mut self, text: &str, final_only: bool) -> Next {
        self.remember_turn(text.trim_end().to_string());
        if final_only {
            return Next::End(self.last_chance(&protocol::read_turn("")));
        }
        Next::step(self.correct(Correction::Repetition))
    }

    /// Put the kept part of a turn into the history (the closing tag a stop removed restored).
    fn keep_turn(&mut self, text: &str, turn: &Turn) {
        self.remember_turn(turn.kept_text(text));
    }

    fn remember_turn(&mut self, kept: String) {
        self.history.push_turn(&kept);
        self.emit(Event::Message {
            message: Message::new(MsgRole::Assistant, kept),
        });
    }
}
