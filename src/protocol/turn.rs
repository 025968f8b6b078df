//! Reading one model turn (SPEC §1.1): a hand-written, case-insensitive scan for the protocol tags.
//!
//! Model text is not XML: a bare `<` in prose or code is content, so no XML reader is used here.

/// A byte range `start..end` into the original turn text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

/// The protocol tags the reader knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tag {
    /// `<think>`: reasoning, removed before anything else.
    Think,
    /// `<thought>`: the model's reasoning for this step.
    Thought,
    /// `<action>`: one tool call.
    Action,
    /// `<final_answer>`: the answer.
    FinalAnswer,
    /// `<observation>`: written by the runtime only; a model that writes one has gone too far.
    Observation,
    /// `<question>`: the task, written by the runtime.
    Question,
}

/// One tagged block found in the turn.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Block {
    /// Which tag opened the block.
    pub tag: Tag,
    /// The whole block, opening tag to closing tag (or to where it was cut off).
    pub span: Span,
    /// The content, trimmed of surrounding whitespace.
    pub body: Span,
    /// Whether the block had its own closing tag.
    pub closed: bool,
}

/// What a turn decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnKind {
    /// The turn ends in an `<action>` block.
    Action,
    /// The turn ends in a `<final_answer>` block.
    Final,
    /// Neither: the runtime sends a format reminder.
    None,
}

/// The result of reading a turn. Text fields are copies; spans point into the original text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Turn {
    /// What the turn decided.
    pub kind: TurnKind,
    /// The `<thought>` blocks before the decision, joined with a blank line.
    pub thought: Option<String>,
    /// Removed `<think>` text.
    pub reasoning: Option<String>,
    /// The content of the deciding `<action>` block (trimmed), when kind is `Action`.
    pub action: Option<String>,
    /// Byte offset of [`Turn::action`] in the original text (for error offsets).
    pub action_offset: Option<usize>,
    /// The content of the deciding `<final_answer>` block (trimmed, CDATA unwrapped), when kind is `Final`.
    pub final_text: Option<String>,
    /// Text after the deciding block (or after a model-written `<observation>`), which is ignored.
    pub discarded: Option<String>,
    /// Leniencies that were needed to read the turn.
    pub warnings: Vec<String>,
    /// Every block found, in order.
    pub blocks: Vec<Block>,
    /// How many bytes of the original text belong in the history: up to the end of the deciding
    /// block, or up to where discarded text starts, or the whole text.
    pub history_end: usize,
    /// Whether the deciding block had its own closing tag (if not, the runtime puts it back in the
    /// history).
    pub deciding_closed: bool,
}

/// Read one model turn.
pub fn read_turn(text: &str) -> Turn {
    let _ = text;
    todo!("protocol helper")
}
