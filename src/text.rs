//! Shortening text for messages: one home for the "first N, then `…`" rule that error messages,
//! previews and the live view all use. (An observation that is too long is cut differently, in
//! the middle with a marker saying how much: `protocol::truncate`.)

/// The first `max` characters of `s`, with `…` when something was cut.
pub(crate) fn clip_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// At most the first `max` bytes of `s` (cut back to a character boundary), with `…` when
/// something was cut.
pub(crate) fn clip_bytes(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipping_keeps_characters_whole_and_marks_the_cut() {
        assert_eq!(clip_chars("héllo", 2), "hé…");
        assert_eq!(clip_chars("hi", 5), "hi");
        assert_eq!(clip_bytes("ééé", 3), "é…");
        assert_eq!(clip_bytes("abc", 3), "abc");
    }
}
