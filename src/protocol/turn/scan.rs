//! The scanner under the turn reader: a case-insensitive search for protocol tags in the live
//! (not masked) text, and trimming that skips masked pieces.
//!
//! Model text is not XML: a bare `<` in prose or code is content, so no XML reader is used here.

use memchr::memchr;

use super::types::{ALL_TAGS, Tag};

/// Characters that are invisible and carry no meaning outside tags: a byte-order mark and the
/// zero-width family. They are trimmed like whitespace.
pub(super) fn is_ignorable(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '\u{feff}' | '\u{200b}' | '\u{200c}' | '\u{200d}' | '\u{2060}'
        )
}

/// Trim whitespace and invisible characters from both ends of `text[a..b]`; returns the new range.
pub(super) fn trim_range(text: &str, a: usize, b: usize) -> (usize, usize) {
    let s = &text[a..b];
    let lead = s.len() - s.trim_start_matches(is_ignorable).len();
    let t = s.trim_end_matches(is_ignorable);
    if t.len() <= lead {
        return (a + lead, a + lead);
    }
    (a + lead, a + t.len())
}

/// A protocol tag at byte `i` (which holds `<`): `(tag, closing, end)` where `end` is one past `>`.
fn tag_at(b: &[u8], i: usize) -> Option<(Tag, bool, usize)> {
    let mut j = i + 1;
    let closing = b.get(j) == Some(&b'/');
    if closing {
        j += 1;
    }
    for tag in ALL_TAGS {
        let name = tag.name().as_bytes();
        if b.len() >= j + name.len() && b[j..j + name.len()].eq_ignore_ascii_case(name) {
            let mut k = j + name.len();
            while k < b.len() && b[k].is_ascii_whitespace() {
                k += 1;
            }
            if b.get(k) == Some(&b'>') {
                return Some((tag, closing, k + 1));
            }
            return None;
        }
    }
    None
}

/// A found tag: where it starts, what it is, where it ends.
#[derive(Debug, Clone, Copy)]
pub(super) struct Found {
    pub(super) start: usize,
    pub(super) tag: Tag,
    pub(super) closing: bool,
    pub(super) end: usize,
}

/// The scanner state: the text, the live end, and masked (removed) ranges.
pub(super) struct Scan<'a> {
    pub(super) text: &'a str,
    pub(super) end: usize,
    /// Sorted, non-overlapping removed ranges.
    masks: Vec<(usize, usize)>,
}

impl<'a> Scan<'a> {
    /// A scan of `text[..end]` with nothing masked yet.
    pub(super) fn new(text: &'a str, end: usize) -> Scan<'a> {
        Scan {
            text,
            end,
            masks: Vec::new(),
        }
    }

    pub(super) fn masked(&self, i: usize) -> Option<usize> {
        self.masks
            .iter()
            .find(|&&(a, b)| a <= i && i < b)
            .map(|&(_, b)| b)
    }

    pub(super) fn add_mask(&mut self, a: usize, b: usize) {
        if a < b {
            self.masks.push((a, b));
            self.masks.sort_unstable();
        }
    }

    /// The next tag from `from` (not inside a masked range) that `want` accepts.
    pub(super) fn find(&self, from: usize, want: impl Fn(Tag, bool) -> bool) -> Option<Found> {
        let b = &self.text.as_bytes()[..self.end];
        let mut i = from;
        while i < b.len() {
            let rel = memchr(b'<', &b[i..])?;
            let at = i + rel;
            if let Some(skip) = self.masked(at) {
                i = skip;
                continue;
            }
            if let Some((tag, closing, end)) = tag_at(b, at)
                && want(tag, closing)
            {
                return Some(Found {
                    start: at,
                    tag,
                    closing,
                    end,
                });
            }
            i = at + 1;
        }
        None
    }

    /// The live (unmasked) pieces of `a..b`.
    pub(super) fn pieces(&self, a: usize, b: usize) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut i = a;
        for &(ma, mb) in &self.masks {
            if mb <= i || ma >= b {
                continue;
            }
            if ma > i {
                out.push((i, ma));
            }
            i = i.max(mb);
        }
        if i < b {
            out.push((i, b));
        }
        out
    }

    /// The live text of `a..b`, as one string.
    pub(super) fn live(&self, a: usize, b: usize) -> String {
        let mut s = String::new();
        for (x, y) in self.pieces(a, b) {
            s.push_str(&self.text[x..y]);
        }
        s
    }

    /// The live range of `a..b` trimmed at both ends (masked pieces in the middle stay masked).
    pub(super) fn trimmed(&self, a: usize, b: usize) -> (usize, usize) {
        let pieces = self.pieces(a, b);
        let mut start = None;
        for &(x, y) in &pieces {
            let (s, e) = trim_range(self.text, x, y);
            if s < e {
                start = Some(s);
                break;
            }
        }
        let Some(start) = start else {
            return (a, a);
        };
        for &(x, y) in pieces.iter().rev() {
            let (s, e) = trim_range(self.text, x, y);
            if s < e {
                return (start, e);
            }
        }
        (start, start)
    }

    pub(super) fn is_blank(&self, a: usize, b: usize) -> bool {
        let (s, e) = self.trimmed(a, b);
        s >= e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_matching() {
        assert!(tag_at(b"<Action >", 0).is_some());
        assert!(tag_at(b"<actions>", 0).is_none());
        assert!(matches!(
            tag_at(b"</THINK>", 0),
            Some((Tag::Think, true, 8))
        ));
    }
}
