//! What the run has been told, split by who said it, for the guards of a constrained turn
//! (`repeat.rs`):
//!
//! - what the run was *given* — the task, a follow-up question, the tools' own text — which a
//!   call may rightly write out again and again (`TurnRequest::strict_arguments`);
//! - the runtime's own *notes* — the loop guard's and the named files' notices, the step count, corrections — which no answer or call has reason to say again
//!   (`TurnRequest::own_words`).
//!
//! Every observation mixes the two, so the lines of each tool's part (the header that names the
//! call, then its output or error) are remembered as they come, and the lines of each
//! observation that are not among them are the runtime's. A run continued from a transcript
//! tells them apart the same way, from the recorded events (`agent/memory.rs`).

use std::collections::HashSet;
use std::sync::Arc;

use super::own_words::OwnWords;
use crate::protocol;

/// What one run was given and the runtime's notes so far.
#[derive(Debug, Default)]
pub(crate) struct Said {
    /// The task, follow-up questions and the tools' text, one after another.
    given: String,
    /// `given` as last handed out, until it grows.
    shared: Option<Arc<str>>,
    tool_lines: HashSet<String>,
    notes: Arc<OwnWords>,
}

impl Said {
    /// The user's words: the task, a follow-up question.
    pub(crate) fn by_user(&mut self, text: &str) {
        self.give(text);
    }

    /// A tool's part of the next observation (the header that names the call, then its output
    /// or its error), its protocol tags neutralised as the observation writes them.
    pub(crate) fn by_tool(&mut self, output: &str) {
        self.give(output);
        let shown = protocol::neutralise(output);
        for line in shown.lines().map(str::trim).filter(|l| !l.is_empty()) {
            self.tool_lines.insert(line.to_string());
        }
    }

    /// An observation as the model reads it: its lines that no tool wrote are the runtime's.
    pub(crate) fn by_runtime(&mut self, observation: &str) {
        let notes = Arc::make_mut(&mut self.notes);
        for line in observation.lines().map(str::trim) {
            if !self.tool_lines.contains(line) {
                notes.add_line(line);
            }
        }
    }

    /// What the run was given, for a turn's request.
    pub(crate) fn given(&mut self) -> Arc<str> {
        self.shared
            .get_or_insert_with(|| Arc::from(self.given.as_str()))
            .clone()
    }

    fn give(&mut self, text: &str) {
        self.given.push_str(text);
        self.given.push('\n');
        self.shared = None;
    }

    /// The notes for a turn's request, when there are any.
    pub(crate) fn notes(&self) -> Option<Arc<OwnWords>> {
        (!self.notes.is_empty()).then(|| self.notes.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notes_are_the_lines_no_tool_wrote() {
        let mut said = Said::default();
        assert!(said.notes().is_none());
        // The tool's part as `act.rs` hands it: the header (the call's arguments) and the output.
        let body = "read_file(path=\"docs/a_rather_long_name_of_a_file.md\") returned 1 line:\n\
                    This line of the file is long enough to be a window of forty bytes, <action>.";
        said.by_tool(body);
        said.by_runtime(&format!(
            "<observation>\n{}\n\nThe question also names b.md, which no call has used yet: call a tool on it before you give your final answer.\n</observation>",
            protocol::neutralise(body)
        ));
        let notes = said.notes().expect("notes");
        let quoted = protocol::neutralise(body);
        assert!(
            notes.find(&quoted, 0).is_none(),
            "the call and the file are the tool's"
        );
        let echo = "<final_answer>the question also names b.md, which no call has used yet";
        assert!(notes.find(echo, 0).is_some());
        // Given: the tool's part and the user's words, not the notes.
        said.by_user("What does the file say?");
        let given = said.given();
        assert!(given.contains("forty bytes, <action>.") && given.contains("the file say"));
        assert!(!given.contains("which no call has used"));
    }
}
