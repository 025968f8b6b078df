//! Text from outside tagloop made safe for a terminal: the one filter every text view of the CLI
//! (the live view, `replay`, `sessions`, the answer on stdout, error messages, the HTML page)
//! passes such text through.

use std::borrow::Cow;

/// Text from outside tagloop made safe to print on a terminal: control characters (C0 but `\n`
/// and `\t`, DEL, C1 U+0080–U+009F) and the bidirectional overrides and isolates (U+202A–U+202E,
/// U+2066–U+2069) are shown visibly as Rust escapes (`\u{1b}`, `\r`), so nothing a model or a
/// tool writes is interpreted by the terminal. A `\r` right before `\n` is kept (a CRLF line end
/// is harmless). Borrowed when there is nothing to change, which is the common case.
pub fn terminal_safe(s: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n' && c != '\t' && c != '\r')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    let lone_cr = |i: usize| s.as_bytes().get(i + 1) != Some(&b'\n');
    if !s
        .char_indices()
        .any(|(i, c)| unsafe_char(c) || (c == '\r' && lone_cr(i)))
    {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for (i, c) in s.char_indices() {
        if unsafe_char(c) || (c == '\r' && lone_cr(i)) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_safe_shows_controls_and_overrides_and_keeps_layout() {
        assert!(matches!(
            terminal_safe("plain\ttext\r\nnext"),
            Cow::Borrowed("plain\ttext\r\nnext")
        ));
        assert_eq!(
            terminal_safe("a\x1b]0;t\x07b\rc\u{9b}d\u{202e}e\u{2066}f\x7f"),
            r"a\u{1b}]0;t\u{7}b\rc\u{9b}d\u{202e}e\u{2066}f\u{7f}"
        );
    }
}
