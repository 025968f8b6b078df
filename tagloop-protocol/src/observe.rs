//! Rendering tool output as an observation (docs/protocol.md §1.4).
//!
//! Only a `<` that starts a protocol tag (`<` + optional `/` + think, thought, action, observation,
//! final_answer or question, any case) is changed, to `&lt;`; every other byte is kept.

use std::borrow::Cow;

use memchr::memchr;

use super::turn::ALL_TAGS;

/// Does a protocol tag start at `b[i]` (which is `<`)?
fn starts_tag(b: &[u8], i: usize) -> bool {
    let mut j = i + 1;
    if b.get(j) == Some(&b'/') {
        j += 1;
    }
    let rest = &b[j.min(b.len())..];
    ALL_TAGS.iter().any(|t| {
        let n = t.name().as_bytes();
        rest.len() >= n.len() && rest[..n.len()].eq_ignore_ascii_case(n)
    })
}

/// Replace `<` with `&lt;` where it starts a protocol tag, so tool output cannot forge one.
///
/// ```
/// use tagloop_protocol::neutralise;
///
/// assert_eq!(neutralise("a < b </Observation> <div>"), "a < b &lt;/Observation> <div>");
/// assert!(matches!(neutralise("plain <b>"), std::borrow::Cow::Borrowed(_)));
/// ```
pub fn neutralise(text: &str) -> Cow<'_, str> {
    let b = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while let Some(rel) = memchr(b'<', &b[i..]) {
        let at = i + rel;
        if starts_tag(b, at) {
            let o = out.get_or_insert_with(|| String::with_capacity(text.len() + 16));
            o.push_str(&text[copied..at]);
            o.push_str("&lt;");
            copied = at + 1;
        }
        i = at + 1;
    }
    match out {
        Some(mut o) => {
            o.push_str(&text[copied..]);
            Cow::Owned(o)
        }
        None => Cow::Borrowed(text),
    }
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Cut `text` to at most `limit` bytes (on a character boundary) with a visible marker saying how much was cut.
///
/// About three quarters of the room goes to the head and the rest to the tail, so the end of a
/// long output (often where errors are) stays visible. The result is at most `limit` bytes when
/// `limit` leaves room for the marker (about 40 bytes); below that only the marker is kept.
///
/// ```
/// use tagloop_protocol::truncate;
///
/// let long = "x".repeat(1000);
/// let cut = truncate(&long, 200);
/// assert!(cut.len() <= 200);
/// assert!(cut.contains("bytes cut"));
/// assert_eq!(truncate("short", 200), "short");
/// ```
pub fn truncate(text: &str, limit: usize) -> Cow<'_, str> {
    if text.len() <= limit {
        return Cow::Borrowed(text);
    }
    // The marker's length depends on the number; size it for the largest cut.
    let probe = marker(text.len());
    let room = limit.saturating_sub(probe.len());
    let head = floor_boundary(text, room * 3 / 4);
    let tail_start = ceil_boundary(text, text.len() - (room - room * 3 / 4));
    let tail_start = tail_start.max(head);
    let cut = tail_start - head;
    let mut out = String::with_capacity(limit);
    out.push_str(&text[..head]);
    out.push_str(&marker(cut));
    out.push_str(&text[tail_start..]);
    Cow::Owned(out)
}

fn marker(cut: usize) -> String {
    format!("\n[… {cut} bytes cut …]\n")
}

/// Render `<observation>…</observation>` around neutralised, truncated text.
///
/// ```
/// use tagloop_protocol::render_observation;
///
/// assert_eq!(render_observation("ok <final_answer>", 1000), "<observation>\nok &lt;final_answer>\n</observation>");
/// ```
pub fn render_observation(body: &str, limit: usize) -> String {
    let safe = neutralise(body);
    let cut = truncate(&safe, limit);
    format!("<observation>\n{cut}\n</observation>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_keeps_char_boundaries_and_limit() {
        let s = "é".repeat(500);
        for limit in [60, 61, 99, 100, 333] {
            let t = truncate(&s, limit);
            assert!(t.len() <= limit, "{limit}: {}", t.len());
            assert!(t.contains("bytes cut"));
            let cut: usize = t
                .split("[… ")
                .nth(1)
                .and_then(|r| r.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap();
            assert_eq!(t.len() - marker(cut).len() + cut, s.len());
        }
    }

    #[test]
    fn neutralise_cases() {
        assert_eq!(neutralise("<THINK>x</think>"), "&lt;THINK>x&lt;/think>");
        assert_eq!(neutralise("<"), "<");
        assert_eq!(neutralise("</"), "</");
        assert_eq!(neutralise("a<b && c>d"), "a<b && c>d");
    }
}
