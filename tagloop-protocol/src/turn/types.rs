//! The result of reading a turn: its tags, blocks and decision (docs/protocol.md §1.1).

use crate::dialect::Dialect;

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

impl Tag {
    /// The tag name as written between `<` and `>`.
    pub fn name(self) -> &'static str {
        match self {
            Tag::Think => "think",
            Tag::Thought => "thought",
            Tag::Action => "action",
            Tag::FinalAnswer => "final_answer",
            Tag::Observation => "observation",
            Tag::Question => "question",
        }
    }
}

/// Every protocol tag, the one list the reader, the observation renderer and the history use.
pub(crate) const ALL_TAGS: [Tag; 6] = [
    Tag::Think,
    Tag::Thought,
    Tag::Action,
    Tag::FinalAnswer,
    Tag::Observation,
    Tag::Question,
];

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

impl Block {
    /// A block of `tag` spanning `span`, its body (trimmed) at `body`.
    pub(super) fn at(
        tag: Tag,
        (start, end): (usize, usize),
        (s, e): (usize, usize),
        closed: bool,
    ) -> Block {
        Block {
            tag,
            span: Span { start, end },
            body: Span { start: s, end: e },
            closed,
        }
    }
}

/// What a turn decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnKind {
    /// The turn ends in an `<action>` block.
    Action,
    /// The turn ends in a `<final_answer>` block.
    Final,
    /// Neither: the runtime sends a format reminder.
    #[default]
    None,
}

/// The result of reading a turn. Text fields are copies; spans point into the original text.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
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
    /// The tool-call dialect the action was written in, when not tagloop's own
    /// (docs/protocol.md §1.8); [`Turn::action`] then holds the call in tagloop's syntax.
    pub dialect: Option<Dialect>,
    /// Why a call in another dialect could not be read (the model is told).
    pub dialect_error: Option<String>,
}

impl Turn {
    /// What a history keeps of the turn `text` was read into: up to the end of its deciding
    /// block ([`Turn::history_end`]), trailing white space dropped, and the deciding block's
    /// closing tag put back when a stop string removed it ([`Turn::deciding_closed`]).
    pub fn kept_text(&self, text: &str) -> String {
        let end = self.history_end.min(text.len());
        let mut kept = text.get(..end).unwrap_or(text).trim_end().to_string();
        if !self.deciding_closed {
            match self.kind {
                TurnKind::Action => kept.push_str("</action>"),
                TurnKind::Final => kept.push_str("</final_answer>"),
                TurnKind::None => {}
            }
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use crate::read_turn;

    #[test]
    fn the_kept_text_ends_with_the_deciding_block_closed() {
        let stopped = "<thought>t</thought>\n<action>f(a=1)";
        assert_eq!(
            read_turn(stopped).kept_text(stopped),
            "<thought>t</thought>\n<action>f(a=1)</action>"
        );
        let chatty = "<final_answer>42</final_answer>\nand more  ";
        assert_eq!(
            read_turn(chatty).kept_text(chatty),
            "<final_answer>42</final_answer>"
        );
        let plain = "just text  \n";
        assert_eq!(read_turn(plain).kept_text(plain), "just text");
    }
}
