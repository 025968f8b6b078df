//! What a conversation mentions, as grounding and unsaid-optional read it: the instructions,
//! the user's messages and the tools' results, lower-cased, with their words (a plural's `s`
//! dropped) and their numbers (written in digits, with thousands separators or as words), so
//! that a call's value is found however it was written (`5`, `5.0`, `five`, `5%` for `0.05`,
//! "Boston, MA" for "Boston").

use serde_json::Value;

use super::Entry;

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

/// What the conversation mentions: its text lower-cased, its words, and its numbers.
#[derive(Debug, Clone)]
pub(crate) struct Mentions {
    text: String,
    words: Vec<String>,
    numbers: Vec<f64>,
}

impl Mentions {
    pub(crate) fn of(instructions: &str, conversation: &[Entry]) -> Mentions {
        let mut text = instructions.to_lowercase();
        for entry in conversation {
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
        Mentions {
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
