//! The runtime's own words: the notes an agent writes to its model (corrections, the loop
//! guard's and the named files' notices, the step count), which the model's answer or call has
//! no reason to say again.
//!
//! Small models under a grammar copy them. gemma, its third identical call refused, answered
//! `The answer is 4.` and went on inside the answer with the loop notice it had just read, then
//! wrote it again and again with its own count (`This is the fourth time…`, `…the fifth time…`)
//! until the turn budget ended it at 1,024 tokens, twice in one run of 11 tasks; SmolLM2 answered
//! with `Your turn was cut off because it kept repeating…` and `You have used all 4 steps…`, and
//! wrote the same correction into `write_file`'s content, 447 tokens three times (experiments.md,
//! issue 31 item 5). No unit of such a text repeats, so the repetition guard does not see it.
//!
//! [`OwnWords`] holds every window of [`WINDOW`] bytes of those notes (ASCII letters lowered);
//! the guard (`repeat.rs`) looks for any of them in a constrained turn's free-text answer and
//! action's arguments and ends the turn where the echo begins. A thought is not read: restating
//! a note there is how a model takes it up. A tool's part of an observation is not the
//! runtime's: the agent leaves its lines out, so an answer may quote a file whatever notes
//! surround it.

use std::collections::HashSet;

/// How many bytes of a note an echo must repeat: long enough that no ordinary sentence of an
/// answer matches one by chance (a file name, a number and a few words are shorter), and that
/// restating a note's point ("calling it once more will not change it", 40 bytes) is not an
/// echo.
pub const WINDOW: usize = 48;

/// The windows of the runtime's notes a model should not write again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnWords {
    windows: HashSet<[u8; WINDOW]>,
}

impl OwnWords {
    /// No notes yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add one line of a note (a line shorter than the window adds nothing).
    pub fn add_line(&mut self, line: &str) {
        let lowered = line.trim().to_ascii_lowercase();
        for w in lowered.as_bytes().windows(WINDOW) {
            let mut key = [0u8; WINDOW];
            key.copy_from_slice(w);
            self.windows.insert(key);
        }
    }

    /// Whether no note was added.
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// Where the first window of a note begins in `text` at or after byte `from`, if any.
    pub fn find(&self, text: &str, from: usize) -> Option<usize> {
        if self.windows.is_empty() {
            return None;
        }
        let bytes = text.as_bytes();
        let mut key = [0u8; WINDOW];
        (from..=bytes.len().checked_sub(WINDOW)?).find(|&i| {
            for (k, b) in key.iter_mut().zip(&bytes[i..i + WINDOW]) {
                *k = b.to_ascii_lowercase();
            }
            self.windows.contains(&key)
        })
    }
}

/// Where a turn that echoes the runtime's notes from byte `at` is cut: at the start of that
/// line's sentence (after the model's own `The answer is 4.` on the same line), else of the
/// line with the blank lines and lone invented tags (`<comment>`) before it, but never before
/// the end of the protocol's last tag (`<final_answer>`, `<action>`, `<thought>`,
/// `</thought>`): what the model wrote of its own before the echo is kept, and a call stays a
/// call (cut, so never run).
pub(crate) fn echo_cut(text: &str, at: usize) -> usize {
    let at = floor_boundary(text, at);
    let floor = ["<final_answer>", "<action>", "<thought>", "</thought>"]
        .iter()
        .filter_map(|tag| text[..at].rfind(tag).map(|i| i + tag.len()))
        .max()
        .unwrap_or(0);
    let line = text[..at].rfind('\n').map_or(0, |i| i + 1).max(floor);
    if let Some(end) = sentence_end(&text[line..at]) {
        return line + end;
    }
    let mut cut = line;
    // Step back over blank lines and lone tags the model made up to open its echo.
    while cut > floor {
        let before = &text[floor..cut - 1];
        let start = before.rfind('\n').map_or(floor, |i| floor + i + 1);
        let line = text[start..cut - 1].trim();
        if !(line.is_empty() || is_lone_tag(line)) {
            break;
        }
        cut = start;
    }
    cut
}

/// Where the last sentence of `s` that ends before its end finishes (after its `.`, `!` or `?`
/// followed by a space), if any.
fn sentence_end(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    (1..b.len())
        .rev()
        .find(|&i| b[i] == b' ' && matches!(b[i - 1], b'.' | b'!' | b'?'))
}

/// A line that is one tag and nothing else (`<comment>`, `</observable>`).
fn is_lone_tag(line: &str) -> bool {
    line.strip_prefix('<')
        .and_then(|l| l.strip_suffix('>'))
        .map(|name| name.strip_prefix('/').unwrap_or(name))
        .is_some_and(|name| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
}

/// The largest char boundary of `text` at or before `at`.
fn floor_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOTE: &str =
        "This is the third time in a row you make exactly this call; it was not run again.";

    fn words() -> OwnWords {
        let mut w = OwnWords::new();
        w.add_line(NOTE);
        w.add_line("short");
        w
    }

    #[test]
    fn a_note_said_again_is_found_whatever_its_case_and_start() {
        let w = words();
        let text = "<final_answer>The answer is 4.\n<comment>\nThis is the fourth time in a row you make exactly this call; It was not run again.";
        let at = w.find(text, 0).expect("an echo");
        assert!(text[at..].starts_with(" time in a row"), "{}", &text[at..]);
        assert_eq!(
            w.find("The answer is 4, from notes.txt and todo.txt together.", 0),
            None
        );
        assert_eq!(w.find("short", 0), None);
        assert!(OwnWords::new().is_empty() && !w.is_empty());
    }

    #[test]
    fn the_cut_keeps_the_models_own_words_and_drops_the_tags_it_made_up() {
        let text = "<thought>I know.</thought>\n<final_answer>The answer is 4.\n<comment>\n\nThis is the fourth time";
        let at = text.find("fourth").expect("present");
        assert_eq!(
            &text[..echo_cut(text, at)],
            "<thought>I know.</thought>\n<final_answer>The answer is 4.\n"
        );
        // An echo on the answer's first line keeps the opened answer, empty.
        let text = "<thought>Hm.</thought>\n<final_answer>You used this result, try something";
        let at = text.find("try").expect("present");
        assert_eq!(
            &text[..echo_cut(text, at)],
            "<thought>Hm.</thought>\n<final_answer>"
        );
        // After the model's own sentence on the same line, that sentence stays.
        let text = "<final_answer>The answer is 4. This is the fourth time in a row";
        let at = text.find("fourth").expect("present");
        assert_eq!(
            &text[..echo_cut(text, at)],
            "<final_answer>The answer is 4."
        );
        // In a call, the call stays.
        let text =
            "<thought>Ok.</thought>\n<action>write_file(path=\"a\", content=\"Your turn was cut";
        let at = text.find("Your").expect("present");
        assert!(text[..echo_cut(text, at)].ends_with("<action>"));
        // In the thought, the thought's tag stays.
        let text = "<thought>\nThis is the third time";
        assert_eq!(&text[..echo_cut(text, 10)], "<thought>");
    }

    #[test]
    fn lone_tags_are_one_tag_and_nothing_else() {
        assert!(is_lone_tag("<comment>") && is_lone_tag("</observable>"));
        assert!(!is_lone_tag("<a b>") && !is_lone_tag("<>") && !is_lone_tag("x <y>"));
    }
}
