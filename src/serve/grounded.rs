//! Whether a further call of a turn comes from the conversation: every string and number in its
//! arguments is found in what the client's messages say (its user messages and tool results).
//!
//! Asked for one thing, small models write the right call and then variants of it until the
//! allowed count runs out (`factorial(number=5)`, then 4, 3, 2…; a triangle's area in `units`,
//! then in `meters`, `feet`…): values the question never gave. A question that asks for several
//! calls names what each needs (two cities, three numbers). So a call after the first in a turn
//! must be grounded this way, or the turn ends before it (`RepeatedBlock::later`); the first call
//! is never held to it (a model may rightly convert or infer its values).

use serde_json::Value;

use super::request::{Ask, Entry};
use crate::protocol;

/// The check for `ask`'s turns: given an `<action>` block's body, whether its call is grounded.
/// A body that does not parse passes (the reader refuses it with the reason).
pub(crate) fn check(ask: &Ask) -> impl Fn(&str) -> bool + Send + Sync + 'static {
    let mut said = String::new();
    for entry in &ask.conversation {
        match entry {
            Entry::Question(q) => said.push_str(q),
            Entry::Results(results) => {
                for (_, text) in results {
                    said.push_str(text);
                    said.push('\n');
                }
            }
            _ => {}
        }
        said.push('\n');
    }
    let said = said.to_lowercase();
    move |body: &str| match protocol::parse_action(body) {
        Ok(call) => call.args.iter().all(|a| grounded(&a.value, &said)),
        Err(_) => true,
    }
}

/// Whether every string and number in `value` is in `said` (lower-cased).
fn grounded(value: &Value, said: &str) -> bool {
    match value {
        Value::String(s) => {
            let s = s.trim().to_lowercase();
            s.is_empty() || said.contains(&s)
        }
        Value::Number(n) => {
            let whole = n
                .as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 1e15)
                .map(|f| format!("{}", f as i64));
            said.contains(&n.to_string()) || whole.is_some_and(|w| said.contains(&w))
        }
        Value::Array(items) => items.iter().all(|v| grounded(v, said)),
        Value::Object(map) => map.values().all(|v| grounded(v, said)),
        Value::Bool(_) | Value::Null => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::request::parse_json;

    fn ask(question: &str) -> Ask {
        let body = serde_json::json!({
            "messages": [{"role": "user", "content": question}],
            "tools": [{"type": "function", "function": {"name": "f"}}]
        });
        Ask::read(&parse_json(body.to_string().as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn values_the_question_gave_pass_and_others_do_not() {
        let check = check(&ask("Factorial of 5 and of 7, in Paris."));
        assert!(check("f(number=7)"));
        assert!(check("f(city=\"paris\", n=5.0)"));
        assert!(check("f(flag=true, list=[5, 7])"));
        assert!(!check("f(number=4)"));
        assert!(!check("f(unit=\"meters\")"));
        assert!(!check("f(list=[5, 6])"));
        // Not a call: left to the reader.
        assert!(check("f(number="));
    }
}
