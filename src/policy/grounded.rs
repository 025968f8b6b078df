//! Whether a further call of a turn comes from the conversation: every string and number in its
//! arguments is found in what the client's messages say (its user messages and tool results).
//!
//! Asked for one thing, small models write the right call and then variants of it until the
//! allowed count runs out (`factorial(number=5)`, then 4, 3, 2…; a triangle's area in `units`,
//! then in `meters`, `feet`…): values the question never gave. A question that asks for several
//! calls names what each needs (two cities, three numbers). So a call after the first in a turn
//! must be grounded this way, or the turn ends before it (`RepeatedBlock::later`); the first call
//! is never held to it (a model may rightly convert or infer its values). A number is given
//! with its thousands grouped (`$700,000` gives 700000) and without its sign ("a loss of
//! $1000" gives -1000): the 0.5B's second loan of BFCL's `parallel_20` and second investment
//! of `parallel_16` ended their turns before these readings.

use serde_json::Value;

use super::{Entry, View};

/// What the client's messages say: its user messages and tool results, one after another.
fn said(view: &View<'_>) -> String {
    let mut said = String::new();
    for entry in view.conversation {
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
    said
}

/// What the client's messages say, lower-cased, to judge a further call's values by; and the
/// same text with its numbers' thousands separators left out (`$700,000` says 700000).
#[derive(Debug, Clone)]
pub(crate) struct Said {
    text: String,
    ungrouped: String,
}

impl Said {
    pub(crate) fn of(view: &View<'_>) -> Said {
        let text = said(view).to_lowercase();
        let ungrouped = ungroup_thousands(&text);
        Said { text, ungrouped }
    }

    /// Whether every string and number in `value` is said.
    pub(crate) fn says(&self, value: &Value) -> bool {
        grounded(value, &self.text) || grounded(value, &self.ungrouped)
    }
}

/// `text` without the commas that group a number's thousands: a comma between a digit and
/// exactly three digits (`1,200`, `1,234,567`), not one that separates numbers (`5,10 and 15`,
/// `46.6,1.88`).
fn ungroup_thousands(text: &str) -> String {
    let b = text.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let mut out = String::with_capacity(text.len());
    for (i, c) in text.char_indices() {
        let grouping = c == ','
            && i > 0
            && digit(i - 1)
            && digit(i + 1)
            && digit(i + 2)
            && digit(i + 3)
            && !digit(i + 4);
        if !grouping {
            out.push(c);
        }
    }
    out
}

/// Whether a turn's line that runs on without a word may be cut as a counting runaway: unless
/// the client gave such a run itself (in its system or user messages, tool results or earlier
/// calls' arguments, across lines), which a call may rightly copy (a list of a hundred numbers
/// to sum). The 0.5B Qwen asked to count the primes between 50 and 150 wrote
/// `count_items(collection=["50", "51", "52", …` until the token budget, twice (226 s on
/// BFCL's `parallel_multiple_6`).
pub(crate) fn may_cut_counting(view: &View<'_>) -> bool {
    let mut given = said(view);
    given.push_str(view.instructions);
    for entry in view.conversation {
        if let Entry::Calls { calls, .. } = entry {
            for call in calls {
                given.push('\n');
                given.push_str(&Value::Object(call.arguments.clone()).to_string());
            }
        }
    }
    !super::holds_wordless_run(&given, super::WORDLESS_LINE)
}

/// Whether every string and number in `value` is in `said` (lower-cased).
fn grounded(value: &Value, said: &str) -> bool {
    match value {
        Value::String(s) => {
            let s = s.trim().to_lowercase();
            s.is_empty() || says_text(said, &s)
        }
        Value::Number(n) => {
            // A sign is the model's reading of the words ("a loss of $1000" is -1000): the
            // magnitude is what the conversation must give ("-1000" says 1000 too).
            let digits = n.to_string();
            let whole = n
                .as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 1e15)
                .map(|f| format!("{}", (f as i64).unsigned_abs()));
            says_number(said, digits.trim_start_matches('-'))
                || whole.is_some_and(|w| says_number(said, &w))
        }
        Value::Array(items) => items.iter().all(|v| grounded(v, said)),
        Value::Object(map) => map.values().all(|v| grounded(v, said)),
        Value::Bool(_) | Value::Null => true,
    }
}

/// Whether `said` holds the text `s`; a short one (three characters at most) as a word of its
/// own, not inside another: "4 inches" says neither `in` nor `m`, the units the 0.5B Qwen added
/// as further calls after `inches` on BFCL's `simple_python_7`.
fn says_text(said: &str, s: &str) -> bool {
    if s.chars().count() > 3 {
        return said.contains(s);
    }
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    said.match_indices(s).any(|(at, _)| {
        let glued_before = word(said[..at].chars().next_back()) && word(s.chars().next());
        let glued_after = word(said[at + s.len()..].chars().next()) && word(s.chars().next_back());
        !glued_before && !glued_after
    })
}

/// Whether `said` writes the number `digits` as a whole number, not as a part of another one
/// (`0` is not said by "20" or "0.5"; `5` is said by "5," and "5.").
fn says_number(said: &str, digits: &str) -> bool {
    let digit_at = |i: usize| said.as_bytes().get(i).is_some_and(u8::is_ascii_digit);
    said.match_indices(digits).any(|(at, _)| {
        let end = at + digits.len();
        let before = at.checked_sub(1).map(|i| said.as_bytes()[i]);
        let glued_before =
            before.is_some_and(|b| b.is_ascii_digit() || b == b'.' && at >= 2 && digit_at(at - 2));
        // Trailing zeros write the same number: `1.5` in "1.50", `2` in "2.0".
        let mut after = end;
        if digits.contains('.') {
            while said.as_bytes().get(after) == Some(&b'0') {
                after += 1;
            }
        } else if said.as_bytes().get(after) == Some(&b'.') {
            let mut z = after + 1;
            while said.as_bytes().get(z) == Some(&b'0') {
                z += 1;
            }
            if z > after + 1 {
                after = z;
            }
        }
        let glued_after =
            digit_at(after) || said.as_bytes().get(after) == Some(&b'.') && digit_at(after + 1);
        !glued_before && !glued_after
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol;
    use crate::serve::{Ask, parse_json};

    /// Whether an `<action>` block's call is grounded (a body that does not parse passes).
    fn grounded_call(view: &View<'_>) -> impl Fn(&str) -> bool + Send + Sync + 'static {
        let said = Said::of(view);
        move |body: &str| match protocol::parse_action(body) {
            Ok(call) => call.args.iter().all(|a| said.says(&a.value)),
            Err(_) => true,
        }
    }

    fn ask(question: &str) -> Ask {
        let body = serde_json::json!({
            "messages": [{"role": "user", "content": question}],
            "tools": [{"type": "function", "function": {"name": "f"}}]
        });
        Ask::read(&parse_json(body.to_string().as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn values_the_question_gave_pass_and_others_do_not() {
        let check = grounded_call(&(ask("Factorial of 5 and of 7, in Paris.")).view());
        assert!(check("f(number=7)"));
        assert!(check("f(city=\"paris\", n=5.0)"));
        assert!(check("f(flag=true, list=[5, 7])"));
        assert!(!check("f(number=4)"));
        assert!(!check("f(unit=\"meters\")"));
        assert!(!check("f(list=[5, 6])"));
        // A number inside another is not said: "20" does not say 0, "7.5" does not say 7.
        let check_round = grounded_call(&(ask("Round 7.5 to 20 places.")).view());
        assert!(!check_round("f(rounding=0)"));
        assert!(!check_round("f(n=7)"));
        assert!(check_round("f(n=7.5, places=20)"));
        // Trailing zeros write the same number.
        let check_zeros = grounded_call(&(ask("Buy at $1.50, sell 2.0 units.")).view());
        assert!(check_zeros("f(price=1.5, n=2)"));
        assert!(!check_zeros("f(price=1.05)"));
        // A short text is said as a word of its own only.
        let check_units =
            grounded_call(&(ask("The circumference of a circle of radius 4 inches.")).view());
        assert!(check_units("f(unit=\"inches\")"));
        assert!(!check_units("f(unit=\"in\")"));
        assert!(!check_units("f(unit=\"m\")"));
        let check_cm = grounded_call(&(ask("Convert 4 inches to cm.")).view());
        assert!(check_cm("f(unit=\"cm\")"));
        assert!(check_cm("f(unit=\"cm.\")"));
        // A sign is the model's reading ("a loss of $1000"); the magnitude must be said.
        let check_loss = grounded_call(&(ask("A gain of $500, then a loss of $1000.")).view());
        assert!(check_loss("f(gain_loss=-1000)"));
        assert!(check_loss("f(gain_loss=-500.0)"));
        assert!(!check_loss("f(gain_loss=-100)"));
        // A number written with thousands separators says the number, a list does not.
        let check_groups =
            grounded_call(&(ask("Loans of $700,000 and 1,234,567; 5,10 and 15.")).view());
        assert!(check_groups("f(amount=700000)"));
        assert!(check_groups("f(amount=1234567)"));
        assert!(check_groups("f(n=10)"));
        assert!(!check_groups("f(n=510)"));
        // Not a call: left to the reader.
        assert!(check("f(number="));
    }
}
