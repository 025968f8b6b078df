//! The files a question names, and which of them no call has used yet.
//!
//! The 1.5B Qwen, asked for a total over "week1.txt to week4.txt", read `week1.txt` and answered
//! with its number, its thought claiming the total; asked to compare two named files it read the
//! first and made up the second's number; asked to write `summary.txt` it edited the files it
//! read instead. The runtime knows what the model loses track of: which names the question gave
//! and which calls have named them since. After each tool result it says so
//! ([`QuestionNames::notice`]), until every name has been used or the question named none.
//!
//! A name is a file word of the question (`notes.txt`, `docs/setup.md`; `path_words.rs`, the
//! reading the decision step shares); a range written
//! `week1.txt to week4.txt` (same stem and extension around a number) names every file between.
//! A call uses a name when one of its string arguments is that name or a path ending in it; a
//! search for it (`pattern`, `query`, `regex`) does not count: it looks inside files.

use serde_json::{Map, Value};

use super::path_words::{PathWord, file_words};

/// Arguments that hold text to look for, not a place: a search for a name does not use it.
const SEARCH_KEYS: [&str; 4] = ["pattern", "query", "regex", "search"];

/// Words that join the two ends of a range of names ("week1.txt to week4.txt").
const RANGE_WORDS: [&str; 9] = [
    "to", "through", "thru", "till", "until", "-", "–", "—", "..",
];

/// The widest range that is expanded (a wider one is taken as its two ends only).
const RANGE_MAX: u64 = 50;

/// The file names a question gives, each with whether a call has used it.
#[derive(Debug, Default, Clone)]
pub(crate) struct QuestionNames {
    names: Vec<(String, bool)>,
}

impl QuestionNames {
    /// The names in `question`, in the order it gives them, ranges expanded, each once.
    pub(crate) fn of(question: &str) -> Self {
        let found: Vec<PathWord> = file_words(question).collect();
        let mut names: Vec<(String, bool)> = Vec::new();
        let mut add = |name: String| {
            if !names.iter().any(|(n, _)| *n == name) {
                names.push((name, false));
            }
        };
        for (i, word) in found.iter().enumerate() {
            add(word.text.clone());
            let Some(next) = found.get(i + 1) else {
                continue;
            };
            let between = question[word.end..next.start].trim().to_lowercase();
            if !RANGE_WORDS.contains(&between.as_str()) {
                continue;
            }
            for inner in range_between(&word.text, &next.text) {
                add(inner);
            }
        }
        QuestionNames { names }
    }

    /// Every name the question gives, used or not.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(|(n, _)| n.as_str())
    }

    /// Mark the names a call's arguments use.
    pub(crate) fn mark_used(&mut self, args: &Map<String, Value>) {
        let mut values = Vec::new();
        for (key, value) in args {
            if SEARCH_KEYS.contains(&key.to_lowercase().as_str()) {
                continue;
            }
            strings(value, &mut values);
        }
        for value in values {
            let value = value.trim().trim_start_matches("./");
            for (name, used) in &mut self.names {
                if value == name || value.ends_with(&format!("/{name}")) {
                    *used = true;
                }
            }
        }
    }

    /// The sentence naming what the question gave and no call has used, and asking for a call
    /// on them before the answer (after the result), or `None` when there
    /// is nothing left (or the question named no file).
    pub(crate) fn notice(&self) -> Option<String> {
        let left: Vec<&str> = self
            .names
            .iter()
            .filter(|(_, used)| !used)
            .map(|(n, _)| n.as_str())
            .collect();
        let (last, rest) = left.split_last()?;
        let list = if rest.is_empty() {
            (*last).to_string()
        } else {
            format!("{} and {last}", rest.join(", "))
        };
        let them = if rest.is_empty() { "it" } else { "them" };
        Some(format!(
            "The question also names {list}, which no call has used yet: call a tool on {them} before you give your final answer."
        ))
    }
}

/// Every string in a value (strings in arrays too).
fn strings<'v>(value: &'v Value, out: &mut Vec<&'v str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// The names strictly between `first` and `last` when both are the same text around a number
/// (`week1.txt`, `week4.txt` → `week2.txt`, `week3.txt`).
fn range_between(first: &str, last: &str) -> Vec<String> {
    let (Some((pre_a, a, post_a)), Some((pre_b, b, post_b))) = (number_in(first), number_in(last))
    else {
        return Vec::new();
    };
    if pre_a != pre_b || post_a != post_b || b <= a || b - a > RANGE_MAX {
        return Vec::new();
    }
    (a + 1..b).map(|n| format!("{pre_a}{n}{post_a}")).collect()
}

/// The last run of digits in a name's file stem: the text before it, its value, the text after.
fn number_in(name: &str) -> Option<(&str, u64, &str)> {
    let stem_end = name.rfind('.')?;
    let stem = &name[..stem_end];
    let end = stem.rfind(|c: char| c.is_ascii_digit())? + 1;
    let start = stem[..end]
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    let n = stem[start..end].parse().ok()?;
    Some((&name[..start], n, &name[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(q: &str) -> Vec<String> {
        QuestionNames::of(q)
            .names
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    }

    #[test]
    fn finds_file_names_and_paths() {
        assert_eq!(
            names("Compare ledger/week2.txt and ledger/week4.txt: which sold more?"),
            ["ledger/week2.txt", "ledger/week4.txt"]
        );
        assert_eq!(
            names("Which port does docs/setup.md mention?"),
            ["docs/setup.md"]
        );
        assert_eq!(names("Write hello to out.txt."), ["out.txt"]);
    }

    #[test]
    fn numbers_abbreviations_and_addresses_are_not_files() {
        assert!(names("Is 2.5 more than 1.5B, e.g. in v1.2? i.e. yes").is_empty());
        assert!(names("See https://example.com/a.html or mail me@host.org").is_empty());
        assert!(names("What is the capital of Peru?").is_empty());
    }

    #[test]
    fn a_range_names_every_file_between() {
        assert_eq!(
            names("The folder holds week1.txt to week4.txt, and summary.txt."),
            [
                "week1.txt",
                "week2.txt",
                "week3.txt",
                "week4.txt",
                "summary.txt"
            ]
        );
        assert_eq!(
            names("part-1.csv - part-3.csv"),
            ["part-1.csv", "part-2.csv", "part-3.csv"]
        );
        // Not a range: different stems, or the words between are not a range's.
        assert_eq!(names("a1.txt to b3.txt"), ["a1.txt", "b3.txt"]);
        assert_eq!(names("week1.txt and week4.txt"), ["week1.txt", "week4.txt"]);
    }

    #[test]
    fn calls_use_names_by_path_not_by_search() {
        let mut n = QuestionNames::of("Sum week1.txt to week3.txt into total.txt.");
        n.mark_used(json!({"path": "ledger/week1.txt"}).as_object().unwrap());
        n.mark_used(
            json!({"pattern": "week2.txt", "path": "."})
                .as_object()
                .unwrap(),
        );
        assert_eq!(
            n.notice().as_deref(),
            Some(
                "The question also names week2.txt, week3.txt and total.txt, which no call has used yet: call a tool on them before you give your final answer."
            )
        );
        n.mark_used(json!({"path": "./week2.txt"}).as_object().unwrap());
        n.mark_used(
            json!({"paths": ["week3.txt", "total.txt"]})
                .as_object()
                .unwrap(),
        );
        assert_eq!(n.notice(), None);
        assert_eq!(QuestionNames::of("no files here").notice(), None);
    }
}
