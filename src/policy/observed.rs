//! The observation of a tool that ran: a header that names the call and how many lines it
//! returned, then the tool's text as it is.
//!
//! Small models lose track of what an observation answers: the 0.5B Qwen, shown a file's lines
//! bare, called the same read again and again (the loop guard then ended it with the first line
//! as the answer), and asked for a count it answered with the lines themselves. Naming the call
//! ties the text to the action above it, and the line count is a fact the runtime knows and a
//! small model cannot count. Measured in docs/experiments.md (issue 31 item 3). A closing
//! sentence that put the choice ("answer now, or another call") last was deleted: on the
//! agent's validation split neither Qwen model did better with it (issue 43; docs/experiments.md).

use serde_json::{Map, Value};

/// An argument value longer than this many characters is shown cut in the header.
const ARG_SHOWN: usize = 60;

/// The observation's body for a call of `tool` with `args` that returned `output`: the header
/// and the tool's text. A runtime note after it (the named files, the loop guard's) is added by
/// the step (`act.rs`), which knows what they say.
pub(crate) fn tool_result(tool: &str, args: &Map<String, Value>, output: &str) -> String {
    let output = output.trim_end();
    let call = call_text(tool, args);
    match output.lines().count() {
        0 => format!("{call} returned nothing."),
        1 => format!("{call} returned 1 line:\n{output}"),
        n => format!("{call} returned {n} lines:\n{output}"),
    }
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

/// Where a tool's own lines are in an observation's `body` (a [`tool_result`], possibly after a
/// runtime notice): `(skip, count)`, the number of body lines before its first line and how many
/// it has, read from the header this file writes. `None` when the body has no such header (an
/// error, a result written before headers existed). Line numbers in a cut marker are the tool's,
/// not the body's: the 81-line log read at `-c 2048` was said to be cut at "lines 11-74" when
/// lines 10-73 were.
pub(crate) fn output_lines(body: &str) -> Option<(usize, usize)> {
    body.lines()
        .take(HEADER_WITHIN)
        .enumerate()
        .find_map(|(i, line)| {
            let (_, size) = line.rsplit_once(") returned ")?;
            let count = match size.strip_suffix(':')? {
                "1 line" => 1,
                n => n.strip_suffix(" lines")?.parse().ok()?,
            };
            Some((i + 1, count))
        })
}

/// How many of an observation body's first lines may hold the header (a runtime notice such as
/// the loop guard's may come first).
const HEADER_WITHIN: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn names_the_call_and_counts_the_lines() {
        let text = tool_result("read_file", &args(json!({"path": "a.txt"})), "x\ny\nz\n");
        assert_eq!(text, "read_file(path=\"a.txt\") returned 3 lines:\nx\ny\nz");
    }

    #[test]
    fn one_line_and_nothing_are_said_so() {
        let one = tool_result("t", &args(json!({"n": 2})), "42");
        assert_eq!(one, "t(n=2) returned 1 line:\n42");
        assert_eq!(tool_result("t", &Map::new(), ""), "t() returned nothing.");
    }

    #[test]
    fn long_arguments_are_cut_in_the_header_only() {
        let long = "q".repeat(500);
        let text = tool_result("write", &args(json!({"content": long})), "ok");
        let header = text.lines().next().unwrap_or_default();
        assert!(header.chars().count() < 100, "{header}");
        assert!(header.contains('…'));
    }

    #[test]
    fn the_header_tells_where_the_tools_lines_are() {
        let one = format!(
            "{}\n\nThe question also names b.txt, which no call has used yet.",
            tool_result("read_file", &args(json!({"path": "a"})), "x\ny\nz")
        );
        assert_eq!(output_lines(&one), Some((1, 3)));
        let single = tool_result("t", &Map::new(), "42");
        assert_eq!(output_lines(&single), Some((1, 1)));
        let after_notice = format!("You made this call before. Its result was:\n{one}");
        assert_eq!(output_lines(&after_notice), Some((2, 3)));
        assert_eq!(output_lines("line 1\nline 2"), None);
        assert_eq!(output_lines(&tool_result("t", &Map::new(), "")), None);
    }
}
