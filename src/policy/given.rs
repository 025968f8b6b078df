//! Whether a repetition in a call's arguments was given: the run read that text before.
//!
//! A call's arguments may repeat a sentence for a reason: the task asked for it ("write 'I will
//! not talk in class' ten times"), or the call copies a file the run read, repetitions and all.
//! A sentence the model repeats that it never read is a loop: SmolLM2's `write_file` content
//! `This is a test, I'm testing it, I'm testing it, …` until the ordinary guard cut it after
//! 150–210 tokens (experiments.md, issue 31 item 5). So in an action's arguments the strict guard
//! (a sentence said three times) cuts only a unit that [`unit_is_given`] says is not in what the
//! run was given (the task, a follow-up question, the tools' text; not the runtime's notes); a
//! given one is left to the ordinary thresholds.
//!
//! The repeating unit is found where its periodicity begins, which need not be where its
//! sentence begins (`" testing it, I'm"`), and it is written as the argument's string spells
//! it (`\n` as two characters in a plain string). So the unit is read with the escapes a call's
//! string uses undone, and looked for from each word start around (every rotation that begins
//! at a word), with the characters that are neither letters nor digits trimmed from its ends.

/// The shortest trimmed unit that is looked for: a shorter one (a word or two) is too common to
/// tell anything, and is taken as given.
const SHORTEST: usize = 4;

/// Whether `unit` (one copy of a repetition, as the model wrote it in a call's arguments) is in
/// `given` (what the run was given — the task, a follow-up question, the tools' text — already
/// lowered by the caller, once per turn), from any word start around, whatever its case.
pub(crate) fn unit_is_given(unit: &str, given: &str) -> bool {
    let unit = unescaped(unit).to_lowercase();
    let starts = word_starts(&unit);
    if starts.is_empty() {
        // No word in it: nothing to ground; the strict guard counts only units with words.
        return true;
    }
    let mut rotated = String::with_capacity(unit.len());
    starts.into_iter().any(|at| {
        rotated.clear();
        rotated.push_str(&unit[at..]);
        rotated.push_str(&unit[..at]);
        let core = rotated.trim_matches(|c: char| !c.is_alphanumeric());
        core.len() < SHORTEST || given.contains(core)
    })
}

/// The byte offsets in `s` where a word begins: an alphanumeric character after one that is not
/// (or at the start).
fn word_starts(s: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut before_word = false;
    for (i, c) in s.char_indices() {
        let word = c.is_alphanumeric();
        if word && !before_word {
            starts.push(i);
        }
        before_word = word;
    }
    starts
}

/// `s` with the escapes of a call's plain string undone: `\n`, `\t`, `\r`, `\"`, `\'`, `\\`.
fn unescaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(other @ ('"' | '\'' | '\\')) => out.push(other),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentence_the_task_asked_for_is_given_from_any_word() {
        let task = "write 'i will not talk in class.' ten times into lines.txt";
        assert!(unit_is_given("I will not talk in class.\\n", task));
        // Found where the periodicity began, mid-sentence.
        assert!(unit_is_given(" talk in class.\nI will not", task));
    }

    #[test]
    fn a_sentence_nobody_gave_is_not() {
        let given = "what is the project codename? observation: intro.md says heron.";
        assert!(!unit_is_given("This is a test, I'm testing it, ", given));
        assert!(!unit_is_given(" I'm testing it again,", given));
    }

    #[test]
    fn a_copied_file_with_repeated_lines_is_given() {
        let observation = "1 | status: pending review\n2 | status: pending review\n";
        assert!(unit_is_given("status: pending review\\n", observation));
    }

    #[test]
    fn a_unit_too_short_to_tell_or_without_words_is_given() {
        assert!(unit_is_given("ok, ", "nothing"));
        assert!(unit_is_given("--- ", "nothing"));
    }

    #[test]
    fn escapes_are_undone_and_unknown_ones_kept() {
        assert_eq!(unescaped(r#"a\nb\t\"c\" \\ \x"#), "a\nb\t\"c\" \\ \\x");
        assert_eq!(unescaped("end\\"), "end\\");
    }
}
