//! Words, as the rules that compare a question with a tool read them.
//!
//! Content words: lower-case runs of letters (`solarFarm` is `solar farm`, `gcd4050` is `gcd`),
//! without [`STOP_WORDS`] (English function words and the verbs every function name starts
//! with: `get`, `calculate`, `find`…), reduced by the Snowball English stemmer (`integration`
//! and `integrate` are both `integr`). No threshold: a docs sentence that shifts a score does
//! not move a shared word.
//!
//! A guessed name (`crate::agent::guess` asks for it) is read once, the same way for serve and
//! a run ([`reading`]): its content
//! words; or nothing, when it holds stop words only (`get_value`); or no guess at all, when it
//! says one content word more than [`MOST_REPEATS`] times. That is a model looping on a
//! word until the budget cut it: asked about Christianity's schisms, Qwen2.5-Coder-0.5B named
//! `christian_christian_christian_christian_ch` (BFCL multiple_19), and the right call it had
//! made was declined by it. A real name says a word twice at most (`convert_celsius_to_kelvin`
//! once each; `to_celsius_from_celsius`).

use std::collections::HashSet;
use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};
use serde_json::Value;

/// The longest name the guess's grammar allows.
pub(crate) const MAX_NAME: usize = 42;

/// The name in the model's answer: its first identifier (a `def` or a code fence around it
/// allowed), `None` when it holds none.
pub(crate) fn name_of(text: &str) -> Option<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty() && !matches!(*w, "def" | "python" | "py"))
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_alphabetic()))
        .map(|w| w.chars().take(MAX_NAME).collect())
}

/// The content words of a tool: its name, description, and its parameters' names and
/// descriptions (`parameters` is the tool's JSON Schema); what a guessed name is compared with.
pub(crate) fn tool_words(name: &str, description: &str, parameters: &Value) -> HashSet<String> {
    let mut words = content_words(name);
    words.extend(content_words(description));
    if let Some(properties) = parameters["properties"].as_object() {
        for (name, schema) in properties {
            words.extend(content_words(name));
            if let Some(d) = schema.get("description").and_then(Value::as_str) {
                words.extend(content_words(d));
            }
        }
    }
    words
}

/// The most times a guessed name may say one content word and still be a guess (`loops` in
/// `bench/bfcl/guess_records.py` reads the records the same way).
pub(crate) const MOST_REPEATS: usize = 2;

/// What a guessed function name says (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reading {
    /// Its content words.
    Words(HashSet<String>),
    /// Stop words only (`get_value`): it names nothing.
    Nothing,
    /// This content word (as the name says it) said more than [`MOST_REPEATS`] times: a loop,
    /// no guess.
    Repeats(String),
}

/// Read a guessed name: its content words, nothing, or a loop on one word.
pub(crate) fn reading(name: &str) -> Reading {
    let words = stemmed_words(name);
    let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (word, stem) in &words {
        let n = counts.entry(stem.as_str()).or_default();
        *n += 1;
        if *n > MOST_REPEATS {
            return Reading::Repeats(word.clone());
        }
    }
    if words.is_empty() {
        Reading::Nothing
    } else {
        Reading::Words(words.into_iter().map(|(_, stem)| stem).collect())
    }
}

/// Stemmed lower-case runs of letters of `text` (camelCase split), stop words left out.
pub(crate) fn content_words(text: &str) -> HashSet<String> {
    stemmed_words(text)
        .into_iter()
        .map(|(_, stem)| stem)
        .collect()
}

/// [`content_words`] in order, each as often as `text` says it, beside the word as said.
fn stemmed_words(text: &str) -> Vec<(String, String)> {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    let stemmer = STEMMER.get_or_init(|| Stemmer::create(Algorithm::English));
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    let mut flush = |word: &mut String| {
        if word.len() >= 2 && !STOP_WORDS.contains(&word.as_str()) {
            out.push((word.clone(), stemmer.stem(word).into_owned()));
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphabetic() {
            if c.is_uppercase() && prev_lower {
                flush(&mut word);
            }
            prev_lower = c.is_lowercase();
            word.extend(c.to_lowercase());
        } else {
            flush(&mut word);
            prev_lower = false;
        }
    }
    flush(&mut word);
    out
}

/// Words that say nothing about what a function is for: English function words, the verbs
/// function names start with, and the words every tool's docs use.
const STOP_WORDS: &[&str] = &[
    "a",
    "an",
    "the",
    "of",
    "to",
    "in",
    "for",
    "and",
    "or",
    "by",
    "with",
    "from",
    "on",
    "at",
    "is",
    "are",
    "be",
    "as",
    "it",
    "its",
    "this",
    "that",
    "what",
    "which",
    "who",
    "how",
    "get",
    "set",
    "calculate",
    "calc",
    "compute",
    "find",
    "fetch",
    "retrieve",
    "determine",
    "check",
    "make",
    "create",
    "list",
    "search",
    "lookup",
    "give",
    "show",
    "value",
    "values",
    "number",
    "data",
    "info",
    "information",
    "result",
    "results",
    "given",
    "specified",
    "provided",
    "function",
    "python",
    "syntax",
    "note",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_says_one_word_three_times_is_no_guess() {
        // BFCL multiple_19's guess, cut at the grammar's 42 characters.
        assert_eq!(
            reading("christian_christian_christian_christian_ch"),
            Reading::Repeats("christian".into())
        );
        // Counted after stemming and case splitting; stop words do not count.
        assert_eq!(
            reading("schismSchisms_schism"),
            Reading::Repeats("schism".into())
        );
        assert_eq!(reading("get_the_value_of_the_the"), Reading::Nothing);
        // Twice is a name.
        assert_eq!(
            reading("celsius_to_celsius"),
            Reading::Words(content_words("celsius"))
        );
        assert_eq!(
            reading("get_religion_schisms"),
            Reading::Words(content_words("religion schisms"))
        );
    }

    #[test]
    fn the_name_is_read_out_of_whatever_the_model_wrapped_it_in() {
        assert_eq!(name_of("triangle_area").as_deref(), Some("triangle_area"));
        assert_eq!(
            name_of("```python\ndef triangle_area(b, h):").as_deref(),
            Some("triangle_area")
        );
        assert_eq!(name_of("  `gcd4050`").as_deref(), Some("gcd4050"));
        assert_eq!(name_of(""), None);
        assert_eq!(name_of("```\n42"), None);
    }
}
