//! What a turn leads to ([`Next`]) and how a run ends ([`Ending`]): the answers `decide.rs` and
//! `act.rs` give the loop in `run.rs`. Below all three, so none of them imports the loop for
//! them.

use serde_json::Value;

use super::Status;
use super::plan::TurnPlan;

/// How a run ends: the status, the accepted answer, and what went wrong (or why it stopped).
#[derive(Debug)]
pub(crate) struct Ending {
    pub(crate) status: Status,
    pub(crate) answer: Option<Value>,
    pub(crate) error: Option<String>,
}

impl Ending {
    /// The run ends without an answer.
    pub(crate) fn stop(status: Status, error: impl Into<String>) -> Self {
        Ending {
            status,
            answer: None,
            error: Some(error.into()),
        }
    }
}

/// What a turn leads to. Only [`Next::Step`] counts as a step (in `Run::steps`, the one
/// place steps are counted): a refused final answer is a correction that costs no step.
#[derive(Debug)]
pub(crate) enum Next {
    /// A step was taken (a tool ran, or the model was corrected): the observation for the
    /// model, and whether the loop guard just refused a repeated call (the next turn may then
    /// only answer).
    Step {
        observation: String,
        refused_call: bool,
    },
    /// A final answer was refused: the model is told why.
    Refused(String),
    /// The decision step declined the turn's call (`first_call.rs`): nothing enters the
    /// history, and the turn is asked again for an answer only.
    Declined,
    /// The context window has room for one final-answer-only turn only: ask for it.
    LastTurn,
    /// The run ends (an accepted answer among the ways).
    End(Ending),
}

impl Next {
    /// A step whose observation is `observation`.
    pub(crate) fn step(observation: String) -> Self {
        Next::Step {
            observation,
            refused_call: false,
        }
    }

    /// What follows a prompt that does not fit even fitted: the final-answer-only turn when one
    /// fits and this turn is not already it, else the end of the run with `context_exceeded`.
    pub(crate) fn context_full(plan: TurnPlan, final_fits: bool, why: String) -> Self {
        if final_fits && !plan.final_only {
            Next::LastTurn
        } else {
            Next::End(Ending::stop(Status::ContextExceeded, why))
        }
    }
}
