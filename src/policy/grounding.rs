//! Serve's decision after a turn is read: whether its calls are calls the question asked for.
//!
//! Small models do not decline. Asked something no declared tool does ("solve this equation"
//! with a distance tool, "where is Tokyo?" with a weather tool), Qwen2.5-Coder-0.5B writes a
//! thought that names the right method and then calls whatever tool is there, filling its
//! arguments with values of its own. The model will not take a "no tool fits" branch (a
//! grammar that made the thought open with the decision, and a `respond(text)` tool, were
//! both measured and lost: docs/experiments.md), so the runtime decides:
//!
//! * **Ungrounded first call → decline.** Under `tool_choice: auto`, a turn's first call whose
//!   required arguments are, every one of them, values the conversation never gave (not in the
//!   client's instructions, user messages or tool results, allowing for case, a word of a
//!   longer value, and numbers written differently: `5`, `5.0`, `five`, `5%` for `0.05`) is
//!   not a call the question asked for. The turn is declined: the core asks the same prompt
//!   again for an answer only (answer.rs), and the client gets a text answer.
//! * Arguments that cannot be judged are left out of the test: booleans, nulls, empty values,
//!   and values of a property whose schema lists its choices (`enum`, `const`): the tool, not
//!   the question, gave those. A call with no argument left to judge is kept, unless a required
//!   free string is empty (`url=""`): a slot filled with nothing the question gave.
//! * A call after the first is held to more (every value grounded) as the turn streams
//!   (`grounded.rs`, the `further` policy's); a call already answered in the history is dropped (`serve/read.rs`).
//! * A first call this rule keeps is judged next by the model's own guess at the function the
//!   question needs, asked without the tools (`guess.rs`): the wrong tool filled with the
//!   question's own numbers is grounded, and only that tells it apart.
//!
//! Tried and dropped: asking the model itself, yes or no, whether the call's tool can answer
//! the question. Asked after its own call it said yes to every irrelevant question; asked in a
//! prompt of its own it said no to right calls too (docs/experiments.md, "Serve's decision").

use serde_json::Value;

use super::Decision;
use super::mentions::judgeable;
use super::{Choice, ToolSpec, View};

/// Whether the read turn's calls are declined, and why (for the transcript and the log):
/// `None` keeps the decision as read.
pub(crate) fn decline(view: &View<'_>, decision: &Decision) -> Option<String> {
    match decision {
        Decision::Calls(calls) => calls
            .first()
            .and_then(|(name, args)| declined_first_call(view, name, args)),
        Decision::Answer { .. } => None,
    }
}

/// Why a turn whose first call is `name(args)` is declined.
fn declined_first_call(
    view: &View<'_>,
    name: &str,
    args: &serde_json::Map<String, Value>,
) -> Option<String> {
    if view.choice != Choice::Auto {
        return None;
    }
    let tool = view.tool(name)?;
    let said = view.mentions();
    let judged: Vec<&str> = judged_arguments(tool, args).collect();
    if judged.is_empty() {
        // A required string left empty (`url=""`) is a value nobody gave: with nothing else
        // to judge, the call fills a slot the question has no value for.
        let empty = empty_required(tool, args);
        return (!empty.is_empty()).then(|| {
            format!(
                "declined: {name}'s required arguments ({}) are empty and nothing else is given",
                empty.join(", ")
            )
        });
    }
    let grounded = judged
        .iter()
        .any(|a| args.get(*a).is_some_and(|v| said.mentions(v)));
    (!grounded).then(|| {
        format!(
            "declined: no value of {name}'s required arguments ({}) is in the conversation",
            judged.join(", ")
        )
    })
}

/// The required arguments of `tool` present in `args` whose values can be judged.
fn judged_arguments<'a>(
    tool: &'a ToolSpec,
    args: &'a serde_json::Map<String, Value>,
) -> impl Iterator<Item = &'a str> + 'a {
    let required = tool.parameters["required"].as_array();
    let properties = &tool.parameters["properties"];
    required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(move |name| !listed(&properties[*name]) && args.get(*name).is_some_and(judgeable))
}

/// The required, free (no `enum`/`const`) string arguments of `tool` that `args` leaves empty.
fn empty_required<'a>(
    tool: &'a ToolSpec,
    args: &'a serde_json::Map<String, Value>,
) -> Vec<&'a str> {
    let properties = &tool.parameters["properties"];
    tool.parameters["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|name| {
            !listed(&properties[*name])
                && args
                    .get(*name)
                    .and_then(Value::as_str)
                    .is_some_and(|v| v.trim().is_empty())
        })
        .collect()
}

/// Whether a property's schema lists its values (`enum`, `const`): the tool, not the
/// conversation, gave a value chosen from them.
pub(crate) fn listed(schema: &Value) -> bool {
    schema.get("enum").is_some() || schema.get("const").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::{Ask, parse_json};

    fn ask(question: &str, properties: Value, required: &[&str]) -> Ask {
        let body = serde_json::json!({
            "messages": [{"role": "system", "content": "The user lives in Lyon."},
                         {"role": "user", "content": question}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {
                "type": "object", "properties": properties, "required": required}}}]
        });
        Ask::read(&parse_json(body.to_string().as_bytes()).unwrap()).unwrap()
    }

    fn declined(ask: &Ask, args: Value) -> bool {
        let Value::Object(args) = args else {
            panic!("not an object")
        };
        declined_first_call(&ask.view(), "f", &args).is_some()
    }

    #[test]
    fn values_the_conversation_gave_are_kept_however_written() {
        let props = serde_json::json!({"a": {}, "b": {}});
        let a = ask(
            "Area of a triangle, base five and height 1,200 m; rate 5%, in Boston.",
            props,
            &["a", "b"],
        );
        assert!(!declined(&a, serde_json::json!({"a": 5, "b": 1200.0})));
        assert!(!declined(&a, serde_json::json!({"a": 0.05})));
        assert!(!declined(&a, serde_json::json!({"a": "Boston, MA"})));
        assert!(!declined(&a, serde_json::json!({"a": "TRIANGLES"})));
        // The instructions count as said.
        assert!(!declined(&a, serde_json::json!({"a": "lyon"})));
        // One grounded required argument is enough.
        assert!(!declined(&a, serde_json::json!({"a": "Paris", "b": 5})));
    }

    #[test]
    fn a_call_of_values_nobody_gave_is_declined() {
        let props = serde_json::json!({"a": {}, "b": {}, "unit": {"enum": ["km", "mi"]}});
        let a = ask("Solve 3x^2 + 2x - 1 = 0.", props, &["a", "b", "unit"]);
        assert!(declined(
            &a,
            serde_json::json!({"a": "Paris", "b": [7, 8], "unit": "km"})
        ));
        assert!(declined(
            &a,
            serde_json::json!({"a": {"lat": 48.85}, "b": "zzz"})
        ));
    }

    #[test]
    fn calls_with_nothing_to_judge_are_kept() {
        let props = serde_json::json!({"a": {}, "unit": {"enum": ["km", "mi"]}, "opt": {}});
        let a = ask("Hello there.", props, &["a", "unit"]);
        // A boolean, an enum's value, an optional argument: not judged.
        assert!(!declined(
            &a,
            serde_json::json!({"a": true, "unit": "km", "opt": "zzz"})
        ));
        assert!(!declined(&a, serde_json::json!({})));
    }

    #[test]
    fn a_required_string_left_empty_with_nothing_else_given_is_declined() {
        let props = serde_json::json!({"a": {}, "b": {}, "unit": {"enum": ["c", "f"]}});
        let a = ask("Tell me a joke.", props.clone(), &["a", "unit"]);
        assert!(declined(&a, serde_json::json!({"a": "", "unit": "c"})));
        assert!(declined(&a, serde_json::json!({"a": "  "})));
        // Another required value the question gave keeps the call.
        let a = ask("Weather in Oslo?", props, &["a", "b"]);
        assert!(!declined(&a, serde_json::json!({"a": "", "b": "Oslo"})));
    }

    #[test]
    fn only_auto_declines() {
        let body = serde_json::json!({
            "messages": [{"role": "user", "content": "Hi"}],
            "tool_choice": "required",
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {
                "type": "object", "properties": {"a": {}}, "required": ["a"]}}}]
        });
        let a = Ask::read(&parse_json(body.to_string().as_bytes()).unwrap()).unwrap();
        assert!(!declined(&a, serde_json::json!({"a": "zzz"})));
    }
}
