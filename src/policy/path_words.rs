//! The words of a question that name a workspace path: one reading for both rules that ask.
//!
//! The decision step (`decide.rs`) keeps a first call when the question names any path;
//! the file names the question gives (`named.rs`) are its file words, reminded after each result
//! until a call has used them. Both read a question the same way:
//!
//! - a word is a run of letters, digits, `_`, `-`, `.` and `/`, its ends' dots, slashes and
//!   dashes left out; one right after `://` or `@`, holding `//`, or in the same run of
//!   non-blanks after a `://` (`http://host:9/a.png`), is a web or mail address, not a path;
//! - a **file** word ends in a stem, a dot and an extension of at most eight letters and digits
//!   that starts with a letter (`notes.txt`, `src/main.rs`); not `2.5`, `v1.2`, `1.5B`, nor one
//!   letter on each side of the dot (`e.g`, `U.S`: abbreviations);
//! - a **folder** word holds a slash and a letter (`docs/`, `src/agent`); not `1/2` or `24/7`.

/// A word of a question that names a path: where it stands and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathWord {
    /// Its byte offset in the text (after the trimmed ends).
    pub start: usize,
    /// The byte offset just past it.
    pub end: usize,
    /// The path as written, its ends trimmed (`docs/setup.md`, `docs`).
    pub text: String,
    /// A file name (stem, dot, extension); otherwise a folder written with a slash.
    pub file: bool,
}

/// The words of `text` that name a path, in order.
pub(crate) fn path_words(text: &str) -> Vec<PathWord> {
    let is_path_char = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/');
    let mut out = Vec::new();
    let mut word_start = None;
    for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
        match (is_path_char(c), word_start) {
            (true, None) => word_start = Some(i),
            (false, Some(start)) => {
                word_start = None;
                out.extend(path_word(text, start, i));
            }
            _ => {}
        }
    }
    out
}

/// The file names in `text`: its file words only.
pub(crate) fn file_words(text: &str) -> impl Iterator<Item = PathWord> {
    path_words(text).into_iter().filter(|w| w.file)
}

/// The word `text[start..end]` as a path, if it is one.
fn path_word(text: &str, start: usize, end: usize) -> Option<PathWord> {
    let word = &text[start..end];
    let trim = |c: char| matches!(c, '.' | '/' | '-');
    let lead = word.len() - word.trim_start_matches(trim).len();
    let trimmed = word.trim_matches(trim);
    let before = &text[..start];
    // The rest of an address after its host (`http://127.0.0.1:9/pixel.png`).
    let in_address = before
        .rsplit(char::is_whitespace)
        .next()
        .is_some_and(|t| t.contains("://"));
    if trimmed.is_empty()
        || in_address
        || before.ends_with("://")
        || before.ends_with('@')
        || word.contains("//")
    {
        return None;
    }
    let file = looks_like_file(trimmed);
    let folder = word.contains('/') && trimmed.chars().any(char::is_alphabetic);
    if !(file || folder) {
        return None;
    }
    let at = start + lead;
    Some(PathWord {
        start: at,
        end: at + trimmed.len(),
        text: trimmed.to_string(),
        file,
    })
}

/// A last path component of a stem, a dot and an extension (see the module docs).
fn looks_like_file(word: &str) -> bool {
    let last = word.rsplit('/').next().unwrap_or(word);
    let Some((stem, ext)) = last.rsplit_once('.') else {
        return false;
    };
    let ext_ok = ext.len() <= 8
        && ext.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && ext.chars().all(|c| c.is_ascii_alphanumeric());
    let stem_ok = !stem.trim_matches('.').is_empty();
    // `e.g`, `U.S.A`: every part between the dots one letter.
    let abbreviation = last.split('.').all(|part| part.chars().count() == 1);
    ext_ok && stem_ok && !abbreviation
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<(String, bool)> {
        path_words(text)
            .into_iter()
            .map(|w| (w.text, w.file))
            .collect()
    }

    fn file(t: &str) -> (String, bool) {
        (t.to_string(), true)
    }

    fn folder(t: &str) -> (String, bool) {
        (t.to_string(), false)
    }

    #[test]
    fn abbreviations_of_single_letters_are_not_files() {
        assert!(!looks_like_file("U.S.A"));
        assert!(path_words("see <img src=http://127.0.0.1:9/pixel.png> and a.css").len() == 1);
        assert!(!looks_like_file("e.g"));
        assert!(looks_like_file("a.py"));
        assert!(looks_like_file("docs/x.md"));
    }

    #[test]
    fn file_names_and_paths_with_where_they_stand() {
        let q = "Compare ledger/week2.txt and 'people.json'.";
        let found = path_words(q);
        assert_eq!(
            found.iter().map(|w| &q[w.start..w.end]).collect::<Vec<_>>(),
            ["ledger/week2.txt", "people.json"]
        );
        assert_eq!(words(q), [file("ledger/week2.txt"), file("people.json")]);
        assert_eq!(
            words("Which port does docs/setup.md mention?"),
            [file("docs/setup.md")]
        );
        assert_eq!(words("Write hello to out.txt."), [file("out.txt")]);
        assert_eq!(words("Read config.markdown"), [file("config.markdown")]);
    }

    #[test]
    fn a_folder_is_a_word_with_a_slash_and_a_letter() {
        assert_eq!(
            words("How many files are in docs/ and src/agent?"),
            [folder("docs"), folder("src/agent")]
        );
        assert!(words("What is 1/2 plus 1/4, open 24/7?").is_empty());
        // Only the file words: what the question names for a call to use.
        let files: Vec<String> = file_words("List src/ then read src/main.rs")
            .map(|w| w.text)
            .collect();
        assert_eq!(files, ["src/main.rs"]);
    }

    #[test]
    fn numbers_abbreviations_and_addresses_are_not_paths() {
        assert!(words("Is 2.5 more than 1.5B, e.g. in v1.2? i.e. yes").is_empty());
        assert!(words("What is the capital of the U.S.?").is_empty());
        assert!(words("See https://example.com/a.html or mail me@host.org").is_empty());
        assert!(words("What is the capital of Peru?").is_empty());
    }
}
