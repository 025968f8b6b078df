//! Text for messages: one home for the "first N, then `…`" rule that error messages, previews
//! and the live view all use (an observation that is too long is cut differently, in the middle
//! with a marker saying how much: `protocol::truncate`), and for byte counts as a user reads them.

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

/// A byte count as a user reads it: `16 MiB`, `512 KiB` when that is exact, else `1500 bytes`
/// (a limit one byte over 64 MiB must not read as "64 MiB"). Takes an in-memory length
/// (`usize`) or a file's (`u64`); a count that fits no `u64` (none does) would read as the largest.
pub fn byte_size(bytes: impl TryInto<u64>) -> String {
    let bytes = bytes.try_into().unwrap_or(u64::MAX);
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
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

    #[test]
    fn byte_sizes_are_exact() {
        assert_eq!(byte_size(16 << 20), "16 MiB");
        assert_eq!(byte_size(512 << 10), "512 KiB");
        assert_eq!(byte_size((1 << 20) + (512 << 10)), "1536 KiB");
        assert_eq!(byte_size((64 << 20) + 1), "67108865 bytes");
        assert_eq!(byte_size(100), "100 bytes");
        assert_eq!(byte_size(100_usize), byte_size(100_u64));
        assert_eq!(byte_size(5_u64 << 40), "5242880 MiB");
    }
}
