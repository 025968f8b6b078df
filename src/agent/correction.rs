//! What the runtime tells the model when a turn cannot be used as it is.
//!
//! Every correction has a kind (the `kind` of [`Event::Correction`](super::Event), which tools
//! such as `tagloop eval` count) and the text the model reads in the next observation. Both live
//! here, side by side, so the words the model sees can be read and changed in one place.

use crate::llm::Finish;

/// The longest parse-error or binding message passed to the model.
const MAX_ERROR_MESSAGE: usize = 1_000;

/// Said after a turn that went on past its first action or final answer.
pub(crate) const DISCARDED_NOTE: &str = "Note: everything after your first complete action or final answer was ignored. Write one action or one final answer per turn, then stop: observations come only from the runtime.";

/// One correction.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Correction {
    /// The action could not be parsed.
    ParseError {
        /// The parser's message.
        message: String,
        /// Where, in bytes from the start of the action text.
        offset: usize,
        /// Set when the turn ended inside an open string: why it ended there.
        cut: Option<Finish>,
    },
    /// A call in another tool-call dialect (docs/protocol.md §1.8) that could not be read.
    Dialect {
        /// The dialect's name.
        dialect: &'static str,
        /// Why it could not be read.
        error: String,
    },
    /// The action named a tool that does not exist.
    UnknownTool {
        /// The name the model wrote.
        name: String,
        /// The closest existing name, when one is close.
        closest: Option<String>,
        /// Every tool's name.
        names: Vec<String>,
    },
    /// The arguments do not fit the tool's parameters.
    BadArguments {
        /// The tool.
        tool: String,
        /// What does not fit.
        error: String,
    },
    /// The turn had neither an action nor a final answer.
    NoDecision,
    /// The turn hit the token limit before deciding.
    Truncated,
    /// The degeneration guard cut the turn.
    Repetition,
    /// A final answer was refused (`empty` when it had no text).
    Final {
        /// Why it was refused.
        why: String,
        /// Whether the answer was empty.
        empty: bool,
    },
    /// A final answer that came before any call used the files the question names: not
    /// accepted yet (`decide.rs`).
    NamedFiles {
        /// Why, with the names.
        why: String,
    },
    /// The same call again: it was not run; its earlier result is repeated.
    Loop {
        /// What the loop guard saw.
        reason: String,
        /// The earlier result.
        earlier: String,
    },
    /// No final answer after the step limit (the run ends; nothing is sent).
    FinalOnly,
}

impl Correction {
    /// The kind, as events and transcripts name it.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Correction::ParseError { .. } | Correction::Dialect { .. } => "parse_error",
            Correction::UnknownTool { .. } => "unknown_tool",
            Correction::BadArguments { .. } => "bad_arguments",
            Correction::NoDecision => "no_decision",
            Correction::Truncated => "truncated",
            Correction::Repetition => "repetition",
            Correction::Final { empty: true, .. } => "empty_final",
            Correction::Final { empty: false, .. } => "invalid_final",
            Correction::NamedFiles { .. } => super::memory::NAMED_FILES_KIND,
            Correction::Loop { .. } => "loop",
            Correction::FinalOnly => "final_only",
        }
    }

    /// The text the model reads where its turns have no thought (`tagloop serve --thought
    /// none`): the corrections that would ask for a short thought ask for the decision alone.
    pub(crate) fn message_without_thought(&self) -> String {
        match self {
            Correction::NoDecision => "Your turn had neither an action nor a final answer. Write either one action that calls a tool, or your final answer, each in its tags as the system prompt shows.".into(),
            Correction::Truncated => "Your turn was cut off by the token limit before it finished; this is not a format error. Write the <action> or <final_answer> at once, and keep it short.".into(),
            Correction::Repetition => "Your turn was cut off because it kept repeating the same text over and over; nothing in it was run. Do not repeat yourself: write one action or your final answer.".into(),
            other => other.message(),
        }
    }

    /// The text the model reads.
    pub(crate) fn message(&self) -> String {
        match self {
            Correction::Dialect { dialect, error } => format!(
                "Your tool call ({dialect} format) could not be read: {}. Write the call in this protocol's form instead: <action>tool_name(arg=\"value\")</action>.",
                cap(error)
            ),
            Correction::ParseError {
                message,
                offset,
                cut,
            } => {
                let mut msg = format!(
                    "Your action could not be parsed: {} (at byte {offset} of the action text). Write exactly one call like tool_name(arg=\"value\").",
                    cap(message)
                );
                match cut {
                    Some(Finish::Stop(stop)) => msg.push_str(&format!(
                        " The turn was cut where a string contained the stop text `{stop}`: inside strings write `<` as \\u003c so that the text does not end your turn."
                    )),
                    Some(Finish::Length) => msg.push_str(
                        " The turn was cut off by the token limit inside a string; write shorter arguments.",
                    ),
                    _ => {}
                }
                msg
            }
            Correction::UnknownTool {
                name,
                closest,
                names,
            } => {
                let mut msg = format!("There is no tool named `{name}`.");
                if let Some(close) = closest {
                    msg.push_str(&format!(" Did you mean `{close}`?"));
                }
                if names.is_empty() {
                    msg.push_str(" You have no tools in this task: give your final answer.");
                } else {
                    msg.push_str(&format!(" The tools are: {}.", names.join(", ")));
                }
                msg
            }
            Correction::BadArguments { tool, error } => {
                format!("The arguments of `{tool}` do not fit: {}", cap(error))
            }
            Correction::NoDecision => "Your turn had neither an action nor a final answer. Write a short thought, then either one action that calls a tool, or your final answer, each in its tags as the system prompt shows.".into(),
            Correction::Truncated => "Your turn was cut off by the token limit before it finished; this is not a format error. Keep the thought short and write the <action> or <final_answer> sooner.".into(),
            Correction::Repetition => "Your turn was cut off because it kept repeating the same text over and over; nothing in it was run. Do not repeat yourself: write one short thought, then one action or your final answer.".into(),
            Correction::Final { why, .. } | Correction::NamedFiles { why } => why.clone(),
            Correction::Loop { reason, earlier } => format!(
                "{reason} Its result was:\n{earlier}\nUse that result, try something different, or give your final answer. Repeating this call again ends the run."
            ),
            Correction::FinalOnly => "No final answer was given after the step limit.".into(),
        }
    }
}

/// A message cut to [`MAX_ERROR_MESSAGE`] bytes.
fn cap(s: &str) -> String {
    crate::protocol::truncate(s, MAX_ERROR_MESSAGE).into_owned()
}
