//! What the runtime has said to the model in its own words, for the guard that keeps a
//! constrained thought or answer from saying it again (`llm::OwnWords`).
//!
//! Every observation the model reads mixes the runtime's notes (the call's header, the closing
//! decision, the loop guard's and the named files' notices, the step count, corrections) with a
//! tool's own text. Only the notes count: an answer may quote a file, whatever notes surround
//! it. So the lines of each tool's output are remembered as they come, and the lines of each
//! observation that are not among them are the runtime's.

use std::collections::HashSet;
use std::sync::Arc;

use crate::llm::OwnWords;
use crate::protocol;

/// The runtime's notes of one run so far, and the tools' lines that are not notes.
#[derive(Debug, Default)]
pub(crate) struct Said {
    tool_lines: HashSet<String>,
    notes: Arc<OwnWords>,
}

impl Said {
    /// A tool's own text (its output or its error), which the next observation shows, its
    /// protocol tags neutralised as the observation writes them.
    pub(crate) fn by_tool(&mut self, output: &str) {
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
        let output =
            "This line of the file is long enough to be a window of forty bytes, <action>.";
        said.by_tool(output);
        said.by_runtime(&format!(
            "read_file(path=\"notes.txt\") returned 1 line:\n{}\n\nIf the results so far answer the whole question, give your final answer now.",
            protocol::neutralise(output)
        ));
        let notes = said.notes().expect("notes");
        let quoted = protocol::neutralise(output);
        assert!(
            notes.find(&quoted, 0).is_none(),
            "the file's line is the tool's"
        );
        let echo = "<final_answer>if the results so far answer the whole question";
        assert!(notes.find(echo, 0).is_some());
    }
}
