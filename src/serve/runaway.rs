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

/// The protocol's tags that no argument of a call can be running into on purpose: the
/// blocks that come after an action, or instead of one.
const TAGS: [&str; 6] = [
    "</thought>",
    "<thought>",
    "<final_answer>",
    "</final_answer>",
    "<observation>",
    "<action>",
];

/// Where a named argument opens a string (`, unit="` or `(unit="`), from its `,` or `(`.
static OPENS_STRING: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r#"[(,]\s*[A-Za-z_][A-Za-z0-9_]*\s*=\s*""#).ok());

/// `action` (the text after `<action>`) without its last argument, when that argument is a
/// string that is never closed and holds one of the protocol's tags; `None` when the action
/// parses as it is, fails for another reason, or is still no call without the argument.
pub(crate) fn without_runaway_string(action: &str) -> Option<String> {
    if !matches!(protocol::parse_action(action.trim()), Err(e) if e.open_string) {
        return None;
    }
    // From the last string opened to the first: the first cut that leaves a call is where the
    // unclosed string began (one opened inside the runaway text leaves it unclosed).
    let re = OPENS_STRING.as_ref()?;
    re.find_iter(action)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .find_map(|open| {
            // After `(` the call keeps its parenthesis; after `,` the comma goes with the
            // argument.
            let keep = if action[open.start()..].starts_with('(') {
                open.start() + 1
            } else {
                open.start()
            };
            let call = format!("{})", action.get(..keep)?.trim_end());
            protocol::parse_action(&call)
                .is_ok()
                .then_some((call, open.end()))
        })
        .filter(|(_, from)| TAGS.iter().any(|t| action[*from..].contains(t)))
        .map(|(call, _)| call)
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
        // turn is continued or corrected), a tag inside a closed string, another error.
        for action in [
            "f(a=1, b=\"x\")",
            "f(a=1, b=\"a long text the budget cut",
            "f(a=\"<final_answer>\", b=1)",
            "f(a=1, b=)</thought>",
            "f(a=1, b=[1, 2</thought>",
            "f(a=\"<final_answer>\", b=\"cut by the budget",
        ] {
            assert_eq!(without_runaway_string(action), None, "{action}");
        }
        // A closed string that quotes a tag, then the runaway one: only the last is left out.
        assert_eq!(
            without_runaway_string("f(a=\"x\", b=\"</thought> and on").as_deref(),
            Some("f(a=\"x\")")
        );
        // The runaway text writes the call again, opening strings of its own.
        assert_eq!(
            without_runaway_string("f(a=1, b=\")</thought> <action>f(a=1, b=\"").as_deref(),
            Some("f(a=1)")
        );
    }
}
