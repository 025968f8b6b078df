//! What the loop knows between turns and hands to the next one: whether the turn may only
//! answer, and whether the model reasons first. Below both the loop (`run.rs`) and the turn
//! (`think.rs`), so neither imports the other for it.

/// What the loop knows between turns and hands to the next one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TurnPlan {
    /// The step limit is reached: only a final answer is accepted.
    pub(crate) final_only: bool,
    /// The model reasons first (see `grammars/`).
    pub(crate) reasoning: bool,
    /// The loop guard refused the last call, or the decision step declined it: the next turn
    /// may only answer.
    pub(crate) after_refused_call: bool,
    /// The decision step declined the turn's call: the answer's grammar begins its thought in
    /// the runtime's words (`grammars/`).
    pub(crate) after_decline: bool,
}
