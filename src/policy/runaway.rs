//! A string argument that ran into the protocol's own tags.
//!
//! A small model unsure of an optional argument's value may open its string and never close
//! it: the 0.5B Qwen on BFCL's `simple_python_9` wrote
//! `geometry_calculate_area_circle(radius=5, unit=")</thought> <final_answer>…` and went on
//! writing thoughts and answers inside the string until the degeneration guard cut it. Corrected
//! and asked again at temperature 0, it wrote the same thing twice more, and the client waited
//! 56 seconds for a text answer. The text after the opening quote is no value the model meant:
//! it is the protocol's next blocks. So the call is read without that argument, and it is used
//! only when what is left still binds and validates against the tool's schema (the argument was
//! optional, and every other one whole); otherwise the turn is corrected as before.

use std::sync::LazyLock;

use regex::Regex;

use crate::protocol;

/// The protocol's tags that no argument of a call runs into on purpose: the ends of the blocks
/// around an action, and the blocks that come instead of one. (An opening `<thought>` or
/// `<action>` is left out: a string that quotes one and was cut by a stop is corrected as ever.)
const TAGS: [&str; 4] = [
    "</thought>",
    "</final_answer>",
    "<final_answer>",
    "<observation>",
];

/// Where a named argument opens a string (`, unit="` or `(unit='`), from its `,` or `(`.
static OPENS_STRING: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r#"[(,]\s*[A-Za-z_][A-Za-z0-9_]*\s*=\s*["']"#).ok());

/// `action` (the text after `<action>`) without its last argument, when that argument is a
/// string that is never closed and runs into one of the protocol's tags; `None` when the action
/// parses as it is, fails for another reason, or is still no call without the argument.
pub(crate) fn without_runaway_string(action: &str) -> Option<String> {
    // Cheap first: no tag, no runaway.
    if !TAGS.iter().any(|t| action.contains(t)) {
        return None;
    }
    // The parser says which string it found unclosed, and where it opened.
    let start = match protocol::parse_action(action) {
        Err(e) if e.open_string => e.string_start?,
        _ => return None,
    };
    let (head, rest) = (action.get(..start)?, action.get(start..)?);
    if !TAGS.iter().any(|t| rest.contains(t)) {
        return None;
    }
    // The argument it is the value of: `, unit="` (or `(unit="`), ending at its opening quote.
    let open = OPENS_STRING
        .as_ref()?
        .find_iter(action.get(..=start)?)
        .last()
        .filter(|m| m.end() == start + 1)?;
    // After `(` the call keeps its parenthesis; after `,` the comma goes with the argument.
    let keep = if head[open.start()..].starts_with('(') {
        open.start() + 1
    } else {
        open.start()
    };
    let call = format!("{})", head.get(..keep)?.trim_end());
    protocol::parse_action(&call).is_ok().then_some(call)
}

#[cfg(test)]
mod tests {
    use super::without_runaway_string;

    #[test]
    fn an_optional_string_that_runs_into_the_next_blocks_is_left_out() {
        let action = "geometry_calculate_area_circle(radius=5, unit=\")</thought> <final_answer>5 units has an area of 78.54.</final_answer> <thought";
        assert_eq!(
            without_runaway_string(action).as_deref(),
            Some("geometry_calculate_area_circle(radius=5)")
        );
        // The only argument: the call is left with none.
        assert_eq!(
            without_runaway_string("f(unit=\"</thought><final_answer>x").as_deref(),
            Some("f()")
        );
    }

    #[test]
    fn anything_else_is_not_touched() {
        // A whole call, a string cut without a tag in it (the stop or the budget cut it: the
        // turn is continued or corrected), a tag inside a closed string, another error, a
        // runaway inside a list or an object (the double-quoted argument before it is whole),
        // an opening tag a stop may have cut a quoting string after.
        for action in [
            "f(a=1, b=\"x\")",
            "f(a=1, b=\"a long text the budget cut",
            "f(a=\"<final_answer>\", b=1)",
            "f(a=1, b=)</thought>",
            "f(a=1, b=[1, 2</thought>",
            "f(a=\"<final_answer>\", b=\"cut by the budget",
            "f(q=\"x\", tags=[\"</thought> and on",
            "f(q=\"x\", opts={\"k\": \"</thought> and on",
            "f(doc=\"use the <thought> tag",
        ] {
            assert_eq!(without_runaway_string(action), None, "{action}");
        }
        // A closed string that quotes a tag, then the runaway one: only the last is left out.
        assert_eq!(
            without_runaway_string("f(a=\"x\", b=\"</thought> and on").as_deref(),
            Some("f(a=\"x\")")
        );
        // The runaway text writes the call again: its last quote may close the string (quotes
        // need no escape inside one), and the reading that fails then is no unclosed string;
        // the turn is corrected as ever.
        assert_eq!(
            without_runaway_string("f(a=1, b=\")</thought> <action>f(a=1, b=\""),
            None
        );
        // A single-quoted runaway after whole double-quoted arguments: only it is left out.
        assert_eq!(
            without_runaway_string(
                "f(city=\"Paris\", country=\"France\", unit=')</thought> <final_answer>x"
            )
            .as_deref(),
            Some("f(city=\"Paris\", country=\"France\")")
        );
    }
}
