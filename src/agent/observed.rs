//! The observation of a tool that ran: a header that names the call and how many lines it
//! returned, the tool's text as it is, and the decision the model is to make next.
//!
//! Small models lose track of what an observation answers: the 0.5B Qwen, shown a file's lines
//! bare, called the same read again and again (the loop guard then ended it with the first line
//! as the answer), and asked for a count it answered with the lines themselves. Naming the call
//! ties the text to the action above it, the line count is a fact the runtime knows and a small
//! model cannot count, and the closing sentence puts the choice ("answer now, or another call")
//! where the model reads last. Measured in BENCHMARKS.md (the side-by-side section).

use serde_json::{Map, Value};

/// The sentence after a tool's result: the decision of the next turn.
pub(crate) const DECIDE_NOTE: &str =
    "If this answers the question, give your final answer now; if not, call another tool.";

/// An argument value longer than this many characters is shown cut in the header.
const ARG_SHOWN: usize = 60;

/// The observation of a call of `tool` with `args` that returned `output`. The decision
/// sentence is left out when `decide` is false (the step that reached the limit: the runtime's
/// limit notice then says that only an answer is left).
pub(crate) fn tool_result(
    tool: &str,
    args: &Map<String, Value>,
    output: &str,
    decide: bool,
) -> String {
    let output = output.trim_end();
    let lines = output.lines().count();
    let size = match lines {
        0 => "nothing".to_string(),
        1 => "1 line".to_string(),
        n => format!("{n} lines"),
    };
    let call = call_text(tool, args);
    let mut text = if lines == 0 {
        format!("{call} returned nothing.")
    } else {
        format!("{call} returned {size}:\n{output}")
    };
    if decide {
        text.push_str("\n\n");
        text.push_str(DECIDE_NOTE);
    }
    text
}

/// The call as the protocol writes it, `tool(name="value", n=2)`, long values cut.
fn call_text(tool: &str, args: &Map<String, Value>) -> String {
    let shown: Vec<String> = args
        .iter()
        .map(|(name, value)| format!("{name}={}", value_text(value)))
        .collect();
    format!("{tool}({})", shown.join(", "))
}

fn value_text(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= ARG_SHOWN {
        return text;
    }
    let cut: String = text.chars().take(ARG_SHOWN).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn names_the_call_and_counts_the_lines() {
        let text = tool_result(
            "read_file",
            &args(json!({"path": "a.txt"})),
            "x\ny\nz\n",
            true,
        );
        assert_eq!(
            text,
            format!("read_file(path=\"a.txt\") returned 3 lines:\nx\ny\nz\n\n{DECIDE_NOTE}")
        );
    }

    #[test]
    fn one_line_and_nothing_are_said_so() {
        let one = tool_result("t", &args(json!({"n": 2})), "42", true);
        assert!(one.starts_with("t(n=2) returned 1 line:\n42\n"), "{one}");
        let none = tool_result("t", &Map::new(), "", true);
        assert_eq!(none, format!("t() returned nothing.\n\n{DECIDE_NOTE}"));
        assert_eq!(
            tool_result("t", &Map::new(), "", false),
            "t() returned nothing."
        );
    }

    #[test]
    fn long_arguments_are_cut_in_the_header_only() {
        let long = "q".repeat(500);
        let text = tool_result("write", &args(json!({"content": long})), "ok", true);
        let header = text.lines().next().unwrap_or_default();
        assert!(header.chars().count() < 100, "{header}");
        assert!(header.contains('…'));
    }
}
