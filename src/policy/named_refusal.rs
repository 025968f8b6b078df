//! `named-files-refusal`: an answer that comes while the question names files no call has used
//! is refused, with those names (`named.rs` keeps which).
//!
//! The 1.5B Qwen, shown the names after each result, answered a four-file total from the first
//! file and a two-file comparison with the second file's number made up; refused once, it read
//! the second file, then answered at once with a third number made up. So the answer is
//! refused, but never as the refusal that would end the run (the last of `max_refusals` in a
//! row: that answer is judged as usual), at most [`NAMED_REFUSALS`] times a run (a question that
//! names a file no call needs costs turns, not the answer), not after the loop guard refused
//! a call (the turn after a refused call may only answer: refused, that
//! answer sent the 0.5B and the 1.5B back to the same call, refused again, to the step limit),
//! and never in a run without a tool that could be given a file's name (`wrap`'s extraction, a
//! single-turn call, a run whose tools take only numbers), which could never use them. The run applies it (`agent/decide.rs`) and counts its refusals in its
//! memory (`agent/memory.rs`).

use serde_json::Value;

use super::QuestionNames;

/// How many answers a run refuses for files the question names and no call has used.
pub(crate) const NAMED_REFUSALS: u32 = 4;

/// Whether a tool of these parameters (a JSON Schema object) could be given a file's name: it
/// has a parameter that is not only a number, a flag or a null (a string, a list, an object, a
/// schema of `anyOf` branches, or one that does not say). A run whose tools take only numbers
/// or flags (a calculator), or none at all, could never use a file the question names: it is
/// neither refused for one nor told about one.
pub(crate) fn could_take_a_name(parameters: &Value) -> bool {
    match parameters.get("properties") {
        // No properties declared: nothing says what the tool takes.
        None => true,
        Some(Value::Object(props)) => props.values().any(takes_more_than_numbers),
        Some(_) => true,
    }
}

/// A property's schema allows a value that is not a number, a boolean or a null.
fn takes_more_than_numbers(schema: &Value) -> bool {
    const ONLY: [&str; 4] = ["number", "integer", "boolean", "null"];
    match schema.get("type") {
        Some(Value::String(t)) => !ONLY.contains(&t.as_str()),
        Some(Value::Array(ts)) => ts
            .iter()
            .any(|t| t.as_str().is_none_or(|t| !ONLY.contains(&t))),
        // No type: `anyOf`, `$ref`, `enum` or nothing at all; taken as text.
        _ => true,
    }
}

/// The run's state when an answer comes, as the refusal weighs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Answering {
    /// The run can call a tool that could be given a file's name ([`could_take_a_name`]).
    pub tools: bool,
    /// Answers refused in a row so far.
    pub refusals: u32,
    /// How many refused in a row end the run.
    pub max_refusals: u32,
    /// Answers refused for names so far.
    pub named_refusals: u32,
    /// The loop guard refused the last call, so this turn could only answer: the runtime asked
    /// for this answer.
    pub after_refused_call: bool,
}

/// Why an answer given `at` is refused, naming the files no call has used (the correction's
/// words), or `None` when the answer is judged as usual.
pub(crate) fn refusal(names: &QuestionNames, at: Answering) -> Option<String> {
    if !at.tools
        || at.refusals + 1 >= at.max_refusals
        || at.named_refusals >= NAMED_REFUSALS
        || at.after_refused_call
    {
        return None;
    }
    let notice = names.notice()?;
    Some(format!(
        "Your answer was not accepted yet: it came before any call used all the files the question names. {notice}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fresh() -> Answering {
        Answering {
            tools: true,
            refusals: 0,
            max_refusals: 3,
            named_refusals: 0,
            after_refused_call: false,
        }
    }

    #[test]
    fn an_answer_before_every_named_file_is_refused_with_the_names_left() {
        let mut names = QuestionNames::of("Compare a.txt and b.txt.");
        names.mark_used(json!({"path": "a.txt"}).as_object().unwrap());
        let why = refusal(&names, fresh()).unwrap();
        assert!(why.contains("b.txt") && !why.contains("a.txt,"), "{why}");
        names.mark_used(json!({"path": "b.txt"}).as_object().unwrap());
        assert!(refusal(&names, fresh()).is_none());
    }

    #[test]
    fn never_without_tools_at_the_last_refusal_past_the_bound_or_after_a_refused_call() {
        let names = QuestionNames::of("Sum week1.txt to week3.txt.");
        assert!(refusal(&names, fresh()).is_some());
        for at in [
            Answering {
                tools: false,
                ..fresh()
            },
            Answering {
                refusals: 2,
                ..fresh()
            },
            Answering {
                named_refusals: NAMED_REFUSALS,
                ..fresh()
            },
            Answering {
                after_refused_call: true,
                ..fresh()
            },
        ] {
            assert!(refusal(&names, at).is_none(), "{at:?}");
        }
        assert!(refusal(&QuestionNames::of("no files"), fresh()).is_none());
    }

    #[test]
    fn a_tool_takes_a_name_unless_its_parameters_are_only_numbers_or_flags() {
        let takes = |v: Value| could_take_a_name(&v);
        assert!(takes(
            json!({"type": "object", "properties": {"path": {"type": "string"}}})
        ));
        assert!(takes(
            json!({"properties": {"q": {"type": ["string", "null"]}}})
        ));
        assert!(takes(
            json!({"properties": {"paths": {"type": "array", "items": {"type": "string"}}}})
        ));
        assert!(takes(json!({"properties": {"where": {"type": "object"}}})));
        assert!(takes(
            json!({"properties": {"x": {"anyOf": [{"type": "string"}, {"type": "number"}]}}})
        ));
        assert!(takes(json!({"properties": {"anything": {}}})));
        assert!(takes(json!({"type": "object"})));
        assert!(takes(json!({"properties": null})));
        assert!(!takes(
            json!({"properties": {"a": {"type": "number"}, "b": {"type": "integer"}}})
        ));
        assert!(!takes(
            json!({"properties": {"on": {"type": ["boolean", "null"]}}})
        ));
        // A tool of no arguments takes no name.
        assert!(!takes(json!({"type": "object", "properties": {}})));
    }
}
