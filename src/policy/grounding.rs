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
//!   (`grounded.rs`); a call already answered in the history is dropped (`serve/read.rs`).
//! * A first call this rule keeps is judged next by the model's own guess at the function the
//!   question needs, asked without the tools (`guess.rs`): the wrong tool filled with the
//!   question's own numbers is grounded, and only that tells it apart.
//!
//! Tried and dropped: asking the model itself, yes or no, whether the call's tool can answer
//! the question. Asked after its own call it said yes to every irrelevant question; asked in a
//! prompt of its own it said no to right calls too (docs/experiments.md, "Serve's decision").

use serde_json::Value;

use super::Decision;
use super::{Choice, Entry, ToolSpec, View};

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
    let said = view.said();
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

/// Whether a value says something the question could have given.
pub(crate) fn judgeable(value: &Value) -> bool {
    match value {
        Value::String(s) => !s.trim().is_empty(),
        Value::Number(_) => true,
        Value::Array(items) => items.iter().any(judgeable),
        Value::Object(map) => map.values().any(judgeable),
        Value::Bool(_) | Value::Null => false,
    }
}

/// What the conversation said: its text lower-cased, its words, and its numbers.
#[derive(Debug, Clone)]
pub(crate) struct Said {
    text: String,
    words: Vec<String>,
    numbers: Vec<f64>,
}

impl Said {
    pub(crate) fn of(view: &View<'_>) -> Said {
        let mut text = view.instructions.to_lowercase();
        for entry in view.conversation {
            text.push('\n');
            match entry {
                Entry::Question(q) => text.push_str(&q.to_lowercase()),
                Entry::Results(results) => {
                    for (_, r) in results {
                        text.push_str(&r.to_lowercase());
                        text.push('\n');
                    }
                }
                Entry::Answer { .. } | Entry::Calls { .. } => {}
            }
        }
        let words: Vec<String> = words(&text).map(stem).collect();
        let mut numbers: Vec<f64> = numbers(&text).collect();
        numbers.extend(words.iter().filter_map(|w| number_word(w)));
        Said {
            text,
            words,
            numbers,
        }
    }

    /// Whether the conversation gave `value` (for a list or an object: any of its values).
    pub(crate) fn mentions(&self, value: &Value) -> bool {
        match value {
            Value::String(s) => self.mentions_text(s),
            Value::Number(n) => n.as_f64().is_some_and(|n| self.mentions_number(n)),
            Value::Array(items) => items
                .iter()
                .filter(|v| judgeable(v))
                .any(|v| self.mentions(v)),
            Value::Object(map) => map
                .values()
                .filter(|v| judgeable(v))
                .any(|v| self.mentions(v)),
            Value::Bool(_) | Value::Null => false,
        }
    }

    fn mentions_text(&self, s: &str) -> bool {
        let s = s.trim().to_lowercase();
        if self.text.contains(&s) {
            return true;
        }
        // A value the model completed or reshaped ("Boston, MA" for "Boston", a path around a
        // file's name): one of its words the question said is enough; a number in it counts
        // as the number.
        words(&s).any(|w| match w.parse::<f64>() {
            Ok(n) => self.mentions_number(n),
            Err(_) => {
                let w = stem(w);
                w.chars().count() >= 3
                    && !STOP_WORDS.contains(&w.as_str())
                    && self.words.contains(&w)
            }
        })
    }

    fn mentions_number(&self, n: f64) -> bool {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
        self.numbers
            .iter()
            .any(|&x| close(x, n) || close(x / 100.0, n) || close(x * 100.0, n))
    }
}

/// Words: runs of letters and digits (a decimal point inside a number kept).
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '.'))
        .map(|w| w.trim_matches('.'))
        .filter(|w| !w.is_empty())
}

/// A word without a plural's `s` (`cities` → `citie` on both sides is good enough to match).
fn stem(word: &str) -> String {
    let w = word
        .strip_suffix('s')
        .filter(|w| w.len() >= 3)
        .unwrap_or(word);
    w.to_string()
}

/// The numbers written in digits in `text`: `1,200`, `3.5`, `-2`, `10km` (10). A comma is a
/// thousands separator only where each group after it has exactly three digits (`1,200`); any
/// other comma separates numbers (`5,10 and 15`, `46.6,1.88`).
fn numbers(text: &str) -> impl Iterator<Item = f64> + '_ {
    text.split(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | ',' | '-')))
        .flat_map(|t| {
            let t = t.trim_matches(|c| matches!(c, '.' | ','));
            let grouped = t.split(',').skip(1).all(|g| {
                let digits = g.split('.').next().unwrap_or(g);
                digits.len() == 3 && digits.chars().all(|c| c.is_ascii_digit())
            });
            let parts: Vec<String> = if grouped {
                vec![t.chars().filter(|c| *c != ',').collect()]
            } else {
                t.split(',').map(str::to_string).collect()
            };
            parts.into_iter().filter_map(|plain| {
                plain
                    .trim_start_matches('-')
                    .parse::<f64>()
                    .ok()
                    .map(|n| if plain.starts_with('-') { -n } else { n })
            })
        })
        .flat_map(|n| [n, -n])
}

/// A number written as a word.
fn number_word(word: &str) -> Option<f64> {
    const WORDS: [&str; 21] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
    ];
    if let Some(i) = WORDS.iter().position(|w| *w == word) {
        return Some(i as f64);
    }
    Some(match word {
        "thirty" => 30.0,
        "forty" => 40.0,
        "fifty" => 50.0,
        "hundred" => 100.0,
        "thousand" => 1000.0,
        "million" => 1e6,
        "dozen" => 12.0,
        "half" => 0.5,
        "twice" | "double" => 2.0,
        _ => return None,
    })
}

/// Words too common to ground a value on their own.
const STOP_WORDS: &[&str] = &[
    "the", "and", "for", "with", "from", "that", "this", "what", "who", "how", "are", "was", "you",
    "your", "all", "any", "not", "but", "can", "get", "has", "have", "its", "our", "out",
];

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

    #[test]
    fn a_comma_groups_thousands_only_before_three_digits() {
        let got: Vec<f64> = numbers("factorial of 5,10 and 15")
            .filter(|n| *n >= 0.0)
            .collect();
        assert_eq!(got, vec![5.0, 10.0, 15.0]);
        let got: Vec<f64> = numbers("at 46.603354,1.8883340")
            .filter(|n| *n >= 0.0)
            .collect();
        assert_eq!(got, vec![46.603354, 1.888334]);
        let got: Vec<f64> = numbers("pay 1,200.50 or 12,345,678")
            .filter(|n| *n >= 0.0)
            .collect();
        assert_eq!(got, vec![1200.5, 12345678.0]);
    }
}
