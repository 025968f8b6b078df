//! Counting runaways: a constrained turn whose last line runs on without a word.
//!
//! Small models under the grammar sometimes count instead of writing: SmolLM2's thought
//! `The answer is: 2022-01-01 2022-01-02 2022-01-03 …` (1,024 tokens, twice, on the suite's
//! `ledger-manager-twice`), its `write_file(path=", 1, 2, 3, …` going on into `content="""…`,
//! gemma's thought `inventory.csv: 1000000…` (one token a digit). No unit of such a run repeats
//! with words in it, so the repetition guard (see `RepeatGuard`) does not read it as a loop: its
//! digits-as-one reading needs words, so that a table of numbers being written is not cut.
//!
//! This guard reads what that one cannot: the end of the text's last line after its last letter
//! (ASCII or not). In a thought (one line) or a line of a free-text answer nothing legitimate
//! runs long without a word (a date, a sum, a list of a few numbers are far shorter), so the
//! bound is [`WORDLESS_PROSE`] bytes. In an action's arguments one line may hold more numbers (a
//! row of a CSV being written, a list argument), so the bound is [`WORDLESS_LINE`] bytes. A
//! newline ends the run, so a table of numbers (many short lines) is never cut; one line of
//! numbers longer than the bound (a list argument of a hundred numbers) needs
//! `keep_repetitions`.
//!
//! What is kept is the start of the run, as the repetition guard keeps the first unit: at most
//! [`KEPT`] bytes of it, ending after a space in their second half where there is one, so the history shows what the model
//! began to write.

/// The longest run without a word on a line of a thought or a free-text answer, in bytes.
pub const WORDLESS_PROSE: usize = 128;
/// The longest run without a word on a line of an action's arguments, in bytes.
pub const WORDLESS_LINE: usize = 256;
/// At most how much of the run is kept.
const KEPT: usize = 32;

/// A run without a word at the end of a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WordlessRun {
    /// Where the run starts (a byte offset into the text).
    pub(crate) start: usize,
    /// Where to cut: after the first few items of the run.
    pub(crate) cut: usize,
}

/// Whether a byte belongs to a word: an ASCII letter, or any byte of a non-ASCII character.
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphabetic() || b >= 0x80
}

/// The run without a word that ends `text`'s last line, when it is longer than `bound` bytes.
pub(crate) fn wordless_tail(text: &str, bound: usize) -> Option<WordlessRun> {
    let bytes = text.as_bytes();
    let start = bytes
        .iter()
        .rposition(|&b| is_word_byte(b) || b == b'\n')
        .map_or(0, |i| i + 1);
    if bytes.len() - start <= bound {
        return None;
    }
    // Every byte of the run is ASCII (a non-ASCII byte counts as a word), so any cut is a char
    // boundary.
    let end = start + KEPT.min(bytes.len() - start);
    // After the last space in the second half of the kept bytes, so that an item is not cut in
    // two (`: 2022-01-01 2022-01-02 `) while a long number keeps its first digits.
    let half = start + KEPT / 2;
    let cut = bytes[half.min(end)..end]
        .iter()
        .rposition(|&b| b == b' ')
        .map_or(end, |i| half + i + 1);
    Some(WordlessRun { start, cut })
}

/// Whether `text` holds a run without a word longer than `bound` bytes, across lines: a text a
/// model may rightly copy such a run from onto one line (`tagloop serve` asks it of the
/// client's messages, where a list of numbers may come one to a line, as pretty-printed JSON).
pub(crate) fn holds_wordless_run(text: &str, bound: usize) -> bool {
    let mut run = 0usize;
    for &b in text.as_bytes() {
        if is_word_byte(b) {
            run = 0;
        } else {
            run += 1;
            if run > bound {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_starts_after_the_last_letter_and_keeps_its_first_items() {
        let text = format!("<thought>The answer is: {}", "2022-01-01 ".repeat(20));
        let run = wordless_tail(&text, WORDLESS_PROSE).expect("220 bytes of dates");
        assert_eq!(&text[run.start..run.cut], ": 2022-01-01 2022-01-01 ");
        assert_eq!(wordless_tail(&text[..run.start + 128], 128), None);
    }

    #[test]
    fn a_newline_ends_the_run() {
        let rows = "1,2,3,4\n".repeat(40);
        assert_eq!(wordless_tail(&format!("content=\"\"\"{rows}"), 16), None);
        assert!(
            wordless_tail(&format!("content=\"\"\"{}", rows.replace('\n', ",")), 256).is_some()
        );
    }

    #[test]
    fn a_run_anywhere_in_a_text_is_found_across_lines_and_a_letter_ends_it() {
        let list = (1..=80)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        assert!(holds_wordless_run(
            &format!("Sum these: [{list}] please"),
            256
        ));
        // Pretty-printed JSON, a number to a line.
        assert!(holds_wordless_run(&list.replace(", ", ",\n  "), 256));
        assert!(!holds_wordless_run(&list.replace(", 4", " x4"), 256));
        assert!(!holds_wordless_run("Weather in Paris on 2024-01-01?", 16));
    }

    #[test]
    fn a_run_without_a_space_is_cut_at_the_kept_bytes() {
        let text = format!("inventory.csv: 1{}", "0".repeat(200));
        let run = wordless_tail(&text, WORDLESS_PROSE).expect("a long number");
        assert_eq!(run.cut - run.start, KEPT);
    }
}
