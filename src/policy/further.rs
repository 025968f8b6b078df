//! Whether a further call of a turn is one the question asks for: as many calls as the question
//! asks, not as many as the turn allows.
//!
//! With `parallel_tool_calls` (OpenAI's default) a turn may hold up to eight calls, and small
//! models go on after the one call a question wanted. The transcripts of BFCL's `multiple`
//! category (one call expected) on the Qwen 0.5B and 1.5B show two kinds of extra call, both
//! made of the question's own values, so the grounding (`grounded.rs`) keeps them:
//!
//! * **the same tool again, with nothing new**: `EuclideanDistance_calculate` with `rounding`
//!   0, 1, 2, 3, 4 (the digits of the points); the same two points swapped; a protein fetched
//!   with `model_3d` true, then false;
//! * **another tool, fed the first call's values**: `math_triangle_area_base_height(base=3,
//!   height=4)` after `math_triangle_area_heron(3, 4, 5)`; `kinematics_calculate_final_speed`
//!   after `kinematics_calculate_displacement`, with the same arguments; a distance, then an
//!   angle of the same points.
//!
//! A wanted further call (BFCL's `parallel` and `parallel_multiple`) differs in both: the same
//! tool comes back for another value the question lists ("the factorial of 5, 10 and 15",
//! "Taylor Swift and Maroon 5"), another tool for another thing the question names ("the area
//! of a rectangle … also the area of a circle", "the GCD … and the LCM"). So a call after the
//! first in a turn must, besides being grounded:
//!
//! * when its tool was called before in the turn: hold a string or number none of those calls
//!   held (booleans do not count: `model_3d=false` is not another protein);
//! * when it was not: have a word in its name or its parameters' names that the question says
//!   and that none of the turn's earlier tools has in its name or parameters' names
//!   (`final_speed` after `calculate_displacement(initial_speed, …)` brings "final", which the
//!   question does not say; `distance_traveled` after `final_velocity` brings "distance", which
//!   "compute the total distance covered" does).
//!
//! A value the conversation does not give is still grounded where an earlier call of the turn
//! filled a parameter of the same name with a value of the model's own: the model derives that
//! parameter (a made-up `year=2021` beside each city of BFCL's `parallel_8`, `hours=3` for "the
//! next three hours", a state's abbreviation for a city), item after item, where a runaway
//! changes a value the question gave. A call that derives a value must then bring a string or
//! number the question says that no earlier call of the turn held: the next item. The variants
//! of a one-call question bring none (`complexity="high"`, then `"low"`, after `"medium"` of the
//! same material and size; the neighbouring law fed the same current and distance).
//!
//! Words are [`words::content_words`](crate::policy::words::content_words): stemmed, camelCase split,
//! without the verbs every function name starts with. A call that fails ends the turn before it
//! (`RepeatedBlock::later`), as a copy does; the calls before it go to the client. Only a turn
//! right after a user message is held to this: once results are back, a new call is the
//! results' doing, not the question's.

use std::collections::HashSet;

use serde_json::Value;

use super::grounded::Said;
use super::words::content_words;
use super::{Entry, ToolSpec, View};
use crate::protocol::{self, Arg, Call};

/// The check for `ask`'s turns: given an `<action>` block's body and the bodies of the blocks
/// the turn kept before it, whether its call is grounded and asked for. A body that does not
/// parse passes (the reader refuses it with the reason).
pub(crate) fn check(view: &View<'_>) -> impl Fn(&str, &[String]) -> bool + Send + Sync + 'static {
    let said = Said::of(view);
    let question = view
        .conversation
        .iter()
        .rev()
        .find_map(|e| match e {
            Entry::Question(q) => Some(q.as_str()),
            _ => None,
        })
        .unwrap_or_default();
    let question_words = content_words(question);
    let fresh = matches!(view.conversation.last(), Some(Entry::Question(_)));
    let tools: Vec<(String, HashSet<String>)> = view
        .tools
        .iter()
        .map(|t| (t.name.clone(), name_words(t)))
        .collect();
    move |body: &str, before: &[String]| {
        let Ok(call) = protocol::parse_action(body) else {
            return true;
        };
        let earlier: Vec<Call> = before
            .iter()
            .filter_map(|b| protocol::parse_action(b).ok())
            .collect();
        let mut derives = false;
        for a in &call.args {
            if said.says(&a.value) {
                continue;
            }
            if !derived(a, &earlier, &said) {
                return false;
            }
            derives = true;
        }
        // A value derived again is for another thing the question names, which the call must
        // then bring: `state="FL"` beside "Miami", not `complexity="high"` beside the first
        // call's material and size.
        if derives && !brings_said(&call, &earlier, &said) {
            return false;
        }
        !fresh || asked_for(&call, &earlier, &tools, &question_words)
    }
}

/// Whether `call` holds a string or number the conversation says and no call of `earlier` held.
fn brings_said(call: &Call, earlier: &[Call], said: &Said) -> bool {
    let held = held_by(earlier);
    call.args.iter().any(|a| {
        let mut mine = Vec::new();
        leaves(&a.value, &mut mine);
        said.says(&a.value) && mine.iter().any(|l| !held.contains(l))
    })
}

/// Whether `arg`'s value, which the conversation does not give, is one the model derives: an
/// earlier call of the turn gave a parameter of the same name a value the conversation does not
/// give either (asked for supermarkets in Los Angeles and sights in Miami, `state="CA"` for one
/// tool and `state="FL"` for the other). A runaway's variant (`factorial(number=4)` after
/// `number=5`) changes a value the question gave.
fn derived(arg: &Arg, earlier: &[Call], said: &Said) -> bool {
    let Some(name) = &arg.name else {
        return false;
    };
    earlier
        .iter()
        .flat_map(|c| &c.args)
        .any(|a| a.name.as_ref() == Some(name) && !said.says(&a.value))
}

/// Whether `call`, after `earlier` in the same turn, is a call the question asks for:
/// `tools` are the declared tools with their name words, `said` the question's words.
fn asked_for(
    call: &Call,
    earlier: &[Call],
    tools: &[(String, HashSet<String>)],
    said: &HashSet<String>,
) -> bool {
    let same: Vec<&Call> = earlier.iter().filter(|c| c.tool == call.tool).collect();
    if !same.is_empty() {
        let held = held_by(same);
        return held_by([call]).iter().any(|v| !held.contains(v));
    }
    let words_of = |name: &str| tools.iter().find(|(n, _)| n == name).map(|(_, w)| w);
    // An undeclared tool is the reader's to refuse.
    let Some(own) = words_of(&call.tool) else {
        return true;
    };
    let before: HashSet<&String> = earlier
        .iter()
        .filter_map(|c| words_of(&c.tool))
        .flatten()
        .collect();
    own.iter().any(|w| !before.contains(w) && said.contains(w))
}

/// A judged value: a string (lower-cased, trimmed) or a number.
#[derive(Debug, PartialEq)]
enum Leaf {
    Text(String),
    Number(f64),
}

/// The strings and numbers the arguments of `calls` hold.
fn held_by<'a>(calls: impl IntoIterator<Item = &'a Call>) -> Vec<Leaf> {
    let mut held = Vec::new();
    for a in calls.into_iter().flat_map(|c| &c.args) {
        leaves(&a.value, &mut held);
    }
    held
}

/// The strings and numbers in `value` (booleans, nulls and empty strings left out).
fn leaves(value: &Value, out: &mut Vec<Leaf>) {
    match value {
        Value::String(s) => {
            let s = s.trim().to_lowercase();
            if !s.is_empty() {
                out.push(Leaf::Text(s));
            }
        }
        Value::Number(n) => out.extend(n.as_f64().map(Leaf::Number)),
        Value::Array(items) => items.iter().for_each(|v| leaves(v, out)),
        Value::Object(map) => map.values().for_each(|v| leaves(v, out)),
        Value::Bool(_) | Value::Null => {}
    }
}

/// The words of a tool's name and its parameters' names.
fn name_words(tool: &ToolSpec) -> HashSet<String> {
    let mut words = content_words(&tool.name);
    if let Some(properties) = tool.parameters["properties"].as_object() {
        for name in properties.keys() {
            words.extend(content_words(name));
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::{Ask, parse_json};
    use serde_json::json;

    fn tool(name: &str, params: &[&str]) -> Value {
        let properties: serde_json::Map<String, Value> =
            params.iter().map(|p| (p.to_string(), json!({}))).collect();
        json!({"type": "function", "function": {"name": name,
            "parameters": {"type": "object", "properties": properties}}})
    }

    fn ask(question: &str, tools: Vec<Value>) -> Ask {
        let body = json!({"messages": [{"role": "user", "content": question}], "tools": tools});
        Ask::read(&parse_json(body.to_string().as_bytes()).unwrap()).unwrap()
    }

    /// Whether each of `calls`, in turn, is kept after the ones before it (the first is never
    /// judged, as in the watch).
    fn kept(ask: &Ask, calls: &[&str]) -> Vec<bool> {
        let check = check(&ask.view());
        let mut before: Vec<String> = Vec::new();
        calls
            .iter()
            .map(|c| {
                let ok = before.is_empty() || check(c, &before);
                if ok {
                    before.push(c.to_string());
                }
                ok
            })
            .collect()
    }

    #[test]
    fn the_same_tool_again_must_bring_a_value_the_earlier_calls_did_not_hold() {
        let a = ask(
            "Compute the Euclidean distance between A(3,4) and B(1,2). Factorial of 5, 10 and 15.",
            vec![
                tool("distance", &["pointA", "pointB", "rounding"]),
                tool("factorial", &["number"]),
                tool("protein", &["name", "model_3d"]),
            ],
        );
        // The digits of the points as the rounding, the points swapped: nothing new.
        assert_eq!(
            kept(
                &a,
                &[
                    "distance(pointA=[3, 4], pointB=[1, 2], rounding=0)",
                    "distance(pointA=[3, 4], pointB=[1, 2], rounding=1)",
                    "distance(pointA=[1, 2], pointB=[3, 4], rounding=0)",
                ]
            ),
            [true, false, false]
        );
        // Each number the question lists: new each time.
        assert_eq!(
            kept(
                &a,
                &[
                    "factorial(number=5)",
                    "factorial(number=10)",
                    "factorial(number=15)"
                ]
            ),
            [true, true, true]
        );
        // A boolean is not another thing asked for.
        let b = ask(
            "The sequence of hemoglobin and myoglobin.",
            vec![tool("protein", &["name", "model_3d"])],
        );
        assert_eq!(
            kept(
                &b,
                &[
                    "protein(name=\"hemoglobin\", model_3d=true)",
                    "protein(name=\"hemoglobin\", model_3d=false)",
                    "protein(name=\"myoglobin\", model_3d=true)",
                ]
            ),
            [true, false, true]
        );
    }

    #[test]
    fn another_tool_must_be_named_by_the_question_beyond_the_earlier_tools() {
        let tools = || {
            vec![
                tool(
                    "kinematics.calculate_displacement",
                    &["initial_speed", "acceleration", "time"],
                ),
                tool(
                    "kinematics.calculate_final_speed",
                    &["initial_speed", "acceleration", "time"],
                ),
                tool(
                    "kinematics.distance_traveled",
                    &["initial_velocity", "acceleration", "time"],
                ),
                tool(
                    "kinematics.final_velocity",
                    &["initial_velocity", "acceleration", "time"],
                ),
            ]
        };
        // "speed" is said, but as the first tool's parameter; "final" is not said.
        let one = ask(
            "Displacement of a car at an initial speed of 20 m/s, accelerating at 10 m/s^2 for 5 seconds?",
            tools(),
        );
        assert_eq!(
            kept(
                &one,
                &[
                    "kinematics.calculate_displacement(initial_speed=20, acceleration=10, time=5)",
                    "kinematics.calculate_final_speed(initial_speed=20, acceleration=10, time=5)",
                ]
            ),
            [true, false]
        );
        // "Also, compute the total distance": the second tool is asked for.
        let two = ask(
            "Final velocity at initial velocity 20 m/s, acceleration 5 m/s^2, time 6 s. Also, compute the total distance covered.",
            tools(),
        );
        assert_eq!(
            kept(
                &two,
                &[
                    "kinematics.final_velocity(initial_velocity=20, acceleration=5, time=6)",
                    "kinematics.distance_traveled(initial_velocity=20, acceleration=5, time=6)",
                ]
            ),
            [true, true]
        );
    }

    #[test]
    fn an_ungrounded_call_still_ends_the_turn() {
        let a = ask("Factorial of 5.", vec![tool("factorial", &["number"])]);
        assert_eq!(
            kept(&a, &["factorial(number=5)", "factorial(number=4)"]),
            [true, false]
        );
    }

    /// A tool whose parameters are all strings or numbers, `required` of them required.
    fn typed_tool(name: &str, params: &[(&str, &str)], required: &[&str]) -> Value {
        let properties: serde_json::Map<String, Value> = params
            .iter()
            .map(|(p, t)| (p.to_string(), json!({"type": t})))
            .collect();
        json!({"type": "function", "function": {"name": name, "parameters":
            {"type": "object", "properties": properties, "required": required}}})
    }

    #[test]
    fn a_derived_value_must_come_with_the_next_thing_the_question_names() {
        let a = ask(
            "Fetch the population of New York City and Los Angeles. A sculpture of marble, size 3.",
            vec![
                typed_tool(
                    "population",
                    &[("area", "string"), ("year", "integer")],
                    &["area"],
                ),
                typed_tool(
                    "price",
                    &[
                        ("material", "string"),
                        ("size", "integer"),
                        ("complexity", "string"),
                    ],
                    &["material", "size"],
                ),
            ],
        );
        // The same made-up year beside the next city the question lists: kept.
        assert_eq!(
            kept(
                &a,
                &[
                    "population(area=\"New York City\", year=2021)",
                    "population(area=\"Los Angeles\", year=2021)",
                ]
            ),
            [true, true]
        );
        // Another made-up value beside nothing new: a variant.
        assert_eq!(
            kept(
                &a,
                &[
                    "price(material=\"marble\", size=3, complexity=\"medium\")",
                    "price(material=\"marble\", size=3, complexity=\"high\")",
                ]
            ),
            [true, false]
        );
        assert_eq!(
            kept(
                &a,
                &[
                    "population(area=\"New York City\", year=2021)",
                    "population(area=\"New York City\", year=2020)",
                ]
            ),
            [true, false]
        );
    }

    #[test]
    fn a_value_the_model_derives_for_each_item_is_kept_and_a_variant_is_not() {
        let a = ask(
            "Closing prices of Apple Inc., Google LLC. and Microsoft Corporation; factorial of 5.",
            vec![
                typed_tool(
                    "stock",
                    &[("symbol", "string"), ("company", "string")],
                    &["symbol"],
                ),
                typed_tool("factorial", &[("number", "integer")], &["number"]),
            ],
        );
        // The first symbol was not said either: the model derives this parameter, beside the
        // company the question names.
        assert_eq!(
            kept(
                &a,
                &[
                    "stock(symbol=\"AAPL\", company=\"Apple\")",
                    "stock(symbol=\"MSFT\", company=\"Microsoft\")",
                    "stock(symbol=\"NYSE\", company=\"Microsoft\")",
                ]
            ),
            [true, true, false]
        );
        // The first number was said: another one is a variant, not a derivation.
        assert_eq!(
            kept(&a, &["factorial(number=5)", "factorial(number=4)"]),
            [true, false]
        );
        // Another parameter's derived value says nothing for this one.
        assert_eq!(
            kept(
                &a,
                &[
                    "stock(symbol=\"AAPL\", company=\"Apple\")",
                    "factorial(number=4)"
                ]
            ),
            [true, false]
        );
        // The same parameter of another tool: a state for each city.
        let b = ask(
            "Supermarkets in Los Angeles and the sights of Miami.",
            vec![
                typed_tool(
                    "supermarkets",
                    &[("city", "string"), ("state", "string")],
                    &["city", "state"],
                ),
                typed_tool(
                    "sights",
                    &[("city", "string"), ("state", "string")],
                    &["city", "state"],
                ),
            ],
        );
        assert_eq!(
            kept(
                &b,
                &[
                    "supermarkets(city=\"Los Angeles\", state=\"CA\")",
                    "sights(city=\"Miami\", state=\"FL\")",
                ]
            ),
            [true, true]
        );
    }
}
