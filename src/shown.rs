//! Text from outside tagloop (a model, a tool, a server, a session file, a client) made safe to
//! show: it can neither drive a terminal nor forge a line of tagloop's own output.
//!
//! Two shapes, one rule for what is escaped:
//!
//! * [`terminal_safe`] for **multi-line text** (an answer, an observation, a turn): newlines and
//!   tabs are kept (and a CR right before a newline), every other control character and the
//!   bidirectional overrides are shown as visible escapes (`\u{1b}`, `\r`).
//! * [`one_line`] and [`Outside`] for **one-line fields** (a header, an id, a model or tool name,
//!   a status, and every log field that carries outside text): newlines, CRs and tabs are
//!   escaped too (`\n`), so a value can never start a line of its own. [`Outside`] is the
//!   `Display` wrapper that log lines use (`error = %Outside(&e)`); [`one_line`] is the same
//!   formatter as a function.
//!
//! Escapes use Rust's `char::escape_default` forms, so `\u{1b}` in the output is the escape
//! character, shown.

use std::borrow::Cow;
use std::fmt::{self, Write};

/// Whether `c` is shown escaped in multi-line text: C0 controls (newline, tab and CR are
/// decided by the caller), DEL, C1 controls (U+0080–U+009F) and the bidirectional overrides and
/// isolates (U+202A–U+202E, U+2066–U+2069).
fn hidden(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Text from outside made safe to print on a terminal, its lines kept: every control character
/// but `\n` and `\t`, and the bidirectional overrides, shown escaped; `\r` too unless a `\n`
/// follows (a CRLF line end is harmless). Borrowed when there is nothing to change, which is the
/// common case.
pub fn terminal_safe(s: &str) -> Cow<'_, str> {
    let kept = |i: usize, c: char| match c {
        '\n' | '\t' => true,
        '\r' => s.as_bytes().get(i + 1) == Some(&b'\n'),
        c => !hidden(c),
    };
    if s.char_indices().all(|(i, c)| kept(i, c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for (i, c) in s.char_indices() {
        if kept(i, c) {
            out.push(c);
        } else {
            out.extend(c.escape_default());
        }
    }
    Cow::Owned(out)
}

/// A one-line field from outside, made safe to print: every control character, newlines,
/// CRs and tabs included, and the bidirectional overrides shown escaped. The same formatter as
/// [`Outside`]. Borrowed when there is nothing to change.
pub fn one_line(s: &str) -> Cow<'_, str> {
    if !s.chars().any(hidden) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(Outside(s).to_string())
}

/// A value from outside tagloop in a log line or another one-line field: its `Display` is the
/// value's own, with every control character (newlines included) and bidirectional override
/// escaped as it is written, so an upstream's error text cannot forge a log line
/// (`…\nINFO request status=200`) nor reach the terminal as an escape sequence.
///
/// ```
/// use tagloop::shown::Outside;
/// let said = "refused\nINFO request status=200 \u{1b}[2J";
/// assert_eq!(Outside(said).to_string(), r"refused\nINFO request status=200 \u{1b}[2J");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Outside<T>(pub T);

impl<T: fmt::Display> fmt::Display for Outside<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(Escaping(f), "{}", self.0)
    }
}

/// A writer that escapes what [`hidden`] names as it passes text on.
struct Escaping<'a, 'b>(&'a mut fmt::Formatter<'b>);

impl Write for Escaping<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut rest = s;
        while let Some(at) = rest.find(hidden) {
            self.0.write_str(&rest[..at])?;
            let mut chars = rest[at..].chars();
            if let Some(c) = chars.next() {
                for e in c.escape_default() {
                    self.0.write_char(e)?;
                }
            }
            rest = chars.as_str();
        }
        self.0.write_str(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_line_text_keeps_its_lines_and_shows_controls_and_overrides() {
        assert!(matches!(
            terminal_safe("plain\ttext\r\nnext"),
            Cow::Borrowed("plain\ttext\r\nnext")
        ));
        assert_eq!(
            terminal_safe("a\x1b]0;t\x07b\rc\u{9b}d\u{202e}e\u{2066}f\x7f"),
            r"a\u{1b}]0;t\u{7}b\rc\u{9b}d\u{202e}e\u{2066}f\u{7f}"
        );
    }

    #[test]
    fn a_one_line_field_never_starts_a_line() {
        assert!(matches!(one_line("gpt-4o · é"), Cow::Borrowed(_)));
        let forged = "m\nmodel x · session y\r\n\tz\x1b[2J\u{202e}";
        let shown = one_line(forged);
        assert_eq!(shown, r"m\nmodel x · session y\r\n\tz\u{1b}[2J\u{202e}");
        assert!(!shown.contains(['\n', '\r', '\t', '\x1b']));
        // The wrapper writes the same, whatever Display it wraps.
        let e = std::io::Error::other(forged);
        assert_eq!(Outside(&e).to_string(), shown);
        assert_eq!(format!("[{}]", Outside("ok")), "[ok]");
    }
}
