//! The words the model reads where fitting left something out: the marker inside a shortened
//! observation, and the one-line summaries of whole steps. Each says what is missing and how to
//! get it back, so a model that needs the text asks for it again instead of guessing.

use serde_json::Value;

use crate::protocol::{self, Call};

/// What a step called, read back from its turn (for the markers).
#[derive(Debug, Default)]
pub(super) struct StepCall {
    /// The `<action>` text as the model wrote it (trimmed), when the turn had one.
    pub(super) action: Option<String>,
    /// The call, when the action parses.
    pub(super) call: Option<Call>,
}

impl StepCall {
    /// Read the call out of an assistant turn.
    pub(super) fn read(turn: &str) -> Self {
        let action = protocol::read_turn(turn).action;
        let call = action
            .as_deref()
            .and_then(|a| protocol::parse_action(a).ok());
        StepCall { action, call }
    }

    /// A named string or integer argument of the call.
    fn arg(&self, name: &str) -> Option<&Value> {
        self.call
            .as_ref()?
            .args
            .iter()
            .find(|a| a.name.as_deref() == Some(name))
            .map(|a| &a.value)
    }

    fn tool(&self) -> Option<&str> {
        self.call.as_ref().map(|c| c.tool.as_str())
    }
}

/// The marker put where the middle of an observation was cut: `lines` are the tool's own cut
/// lines (1-based, inclusive, counted from the first line the tool returned; `None` when only
/// the runtime's own notes were cut), `bytes` the size of what was cut.
pub(super) fn cut_marker(call: &StepCall, lines: Option<(usize, usize)>, bytes: usize) -> String {
    let cut = match lines {
        Some((a, b)) => size(bytes, b + 1 - a),
        None => format!("{bytes} byte{}", if bytes == 1 { "" } else { "s" }),
    };
    let what = format!("[… {cut} cut here to fit the context window");
    match (call.tool(), lines) {
        (Some("read_file"), Some((from, to))) => {
            // The tool's first line is the file's `start_line` (1 when none was given).
            let first = call.arg("start_line").and_then(Value::as_u64).unwrap_or(1) as usize;
            let (a, b) = (first + from - 1, first + to - 1);
            match call.arg("path").and_then(Value::as_str) {
                Some(path) => format!(
                    "{what}: lines {a}-{b} of the file. To see them: read_file(path={}, start_line={a})]",
                    quoted(path)
                ),
                None => format!(
                    "{what}: lines {a}-{b} of the file; read them again with start_line={a}]"
                ),
            }
        }
        (Some(tool), _) if tool.contains("search") || tool.contains("grep") => {
            format!("{what}. To see them, run the same search again, or a narrower one]")
        }
        (Some(tool), _) => format!("{what}. To see them, call {tool} again]"),
        (None, _) => format!("{what}]"),
    }
}

/// The assistant side of a summarised step: its decision alone, the thought left out.
pub(super) fn summary_turn(call: &StepCall) -> String {
    match &call.action {
        Some(action) => format!("<action>{action}</action>"),
        None => "<thought>[this turn was left out to fit the context window]</thought>".into(),
    }
}

/// The observation of a summarised step: one line with the result's size.
pub(super) fn summary_observation(call: &StepCall, bytes: usize, lines: usize) -> String {
    let again = match call.tool() {
        Some(tool) => format!("; call {tool} again to see it"),
        None => String::new(),
    };
    format!(
        "<observation>\n[result of {} left out to fit the context window{again}]\n</observation>",
        size(bytes, lines)
    )
}

/// "1,234 bytes, 40 lines".
fn size(bytes: usize, lines: usize) -> String {
    format!(
        "{bytes} byte{}, {lines} line{}",
        if bytes == 1 { "" } else { "s" },
        if lines == 1 { "" } else { "s" }
    )
}

/// A path as a protocol string literal.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}
