//! The scanner under the turn reader: a case-insensitive search for protocol tags in the live
//! (not masked) text, and trimming that skips masked pieces.
//!
//! Model text is not XML: a bare `<` in prose or code is content, so no XML reader is used here.

use memchr::memchr;

use super::types::{ALL_TAGS, Tag};
use crate::steps;

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
    steps::step(lead + (s.len() - t.len()));
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

/// The number of probes of a binary search among `n` ranges (a step count, see [`steps`]).
fn probes(n: usize) -> usize {
    (usize::BITS - n.leading_zeros()) as usize
}

/// When `i` lies in one of `ranges` (sorted, disjoint, end-exclusive), the end of that range.
/// A binary search: the scanner asks this for every `<` it meets, so it must not walk the list.
pub(super) fn covering(ranges: &[(usize, usize)], i: usize) -> Option<usize> {
    steps::step(probes(ranges.len()));
    let after = ranges.partition_point(|&(a, _)| a <= i);
    let &(_, b) = ranges[..after].last()?;
    (i < b).then_some(b)
}

/// `ranges` sorted and merged where they overlap or nest (a thought holding a `<think>` block),
/// ready for [`covering`].
pub(super) fn merged(mut ranges: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    ranges.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
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

    /// The masked ranges, sorted and disjoint.
    pub(super) fn masks(&self) -> &[(usize, usize)] {
        &self.masks
    }

    /// When byte `i` is masked, the end of its mask (where live text goes on).
    pub(super) fn masked(&self, i: usize) -> Option<usize> {
        covering(&self.masks, i)
    }

    /// Mask `a..b`, which overlaps no mask already there. Think blocks are masked in the order
    /// they are found, so the common case is a push at the end; only the fence around a turn
    /// that opens with reasoning lands before another mask.
    pub(super) fn add_mask(&mut self, a: usize, b: usize) {
        if a < b {
            let at = self.masks.partition_point(|&(ma, _)| ma < a);
            steps::step(self.masks.len() - at);
            self.masks.insert(at, (a, b));
        }
    }

    /// The next tag from `from` (not inside a masked range) that `want` accepts.
    pub(super) fn find(&self, from: usize, want: impl Fn(Tag, bool) -> bool) -> Option<Found> {
        let b = &self.text.as_bytes()[..self.end];
        let mut i = from;
        while i < b.len() {
            let Some(rel) = memchr(b'<', &b[i..]) else {
                steps::step(b.len() - i);
                return None;
            };
            steps::step(rel + 1);
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
    ///
    /// Only the masks that meet `a..b` are visited (found by binary search), so reading many
    /// blocks of a turn with many removed `<think>` blocks does not walk all masks per block.
    pub(super) fn pieces(&self, a: usize, b: usize) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut i = a;
        // Masks are disjoint and sorted, so their ends are sorted too.
        let first = self.masks.partition_point(|&(_, mb)| mb <= a);
        steps::step(probes(self.masks.len()));
        for &(ma, mb) in &self.masks[first..] {
            steps::step(1);
            if ma >= b {
                break;
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

/// The next tag that `want` accepts, for a reader whose position only moves forward: the
/// answer is remembered and reused while it still lies ahead, so the text is scanned once in
/// all rather than once per ask. (Each `<thought>` asks where the next deciding tag is; asking
/// the scanner afresh every time read the rest of the turn once per thought.)
pub(super) struct Ahead<F> {
    want: F,
    /// Where the remembered search started, and what it found (`None`: nothing up to the end).
    last: Option<(usize, Option<Found>)>,
}

impl<F: Fn(Tag, bool) -> bool> Ahead<F> {
    /// Nothing searched yet.
    pub(super) fn new(want: F) -> Ahead<F> {
        Ahead { want, last: None }
    }

    /// The first tag `want` accepts at or after `from` in `scan`. Asks with a `from` that never
    /// decreases cost one scan of the text in all.
    pub(super) fn next(&mut self, scan: &Scan<'_>, from: usize) -> Option<Found> {
        if let Some((searched, found)) = self.last
            && searched <= from
            && found.is_none_or(|f| f.start >= from)
        {
            // Nothing `want` accepts lies between `searched` and `found`, so nothing lies
            // between `from` and it either.
            return found;
        }
        let found = scan.find(from, &self.want);
        self.last = Some((from, found));
        found
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
