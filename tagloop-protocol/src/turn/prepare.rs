//! Preparing a turn before its blocks are read (docs/protocol.md §1.1): a partial stop string at
//! the end is cut off, `<think>` blocks are removed, then a markdown fence around the whole turn
//! is unwrapped. Removed pieces are *masked* in the [`Scan`], never copied out, so every span
//! still points into the original text.

use memchr::memchr;

use super::scan::{Scan, trim_range};
use super::types::{Block, Tag};

/// Stop strings and closing tags whose proper prefix at the very end of a turn is removed.
const PARTIAL_SUFFIXES: [&str; 8] = [
    "</action>",
    "<observation>",
    "</final_answer>",
    "</tool_call>",
    "</function_calls>",
    "</thought>",
    "</think>",
    "</observation>",
];

/// Length of a trailing proper prefix of a stop string or closing tag (`</act`, `<observ`), or 0.
pub(super) fn partial_suffix_len(text: &str) -> usize {
    let b = text.as_bytes();
    let window = b.len().saturating_sub(16);
    let Some(rel) = b[window..].iter().rposition(|&c| c == b'<') else {
        return 0;
    };
    let tail = &b[window + rel..];
    let hit = PARTIAL_SUFFIXES
        .iter()
        .any(|s| tail.len() < s.len() && s.as_bytes()[..tail.len()].eq_ignore_ascii_case(tail));
    if hit { tail.len() } else { 0 }
}

/// Take one `<think>` block out of the turn: its body (trimmed) becomes a piece of reasoning, the
/// whole block is masked from the rest of the reading and recorded.
fn take_think(
    scan: &mut Scan<'_>,
    (start, end): (usize, usize),
    (body_start, body_end): (usize, usize),
    closed: bool,
    pieces: &mut Vec<String>,
    blocks: &mut Vec<Block>,
) {
    let (s, e) = trim_range(scan.text, body_start, body_end);
    pieces.push(scan.text[s..e].to_string());
    blocks.push(Block::at(Tag::Think, (start, end), (s, e), closed));
    scan.add_mask(start, end);
}

/// Remove `<think>` blocks (docs/protocol.md §1.1.1); returns the reasoning pieces and their blocks.
pub(super) fn remove_think(scan: &mut Scan<'_>, blocks: &mut Vec<Block>) -> Option<String> {
    let mut pieces: Vec<String> = Vec::new();
    let first = scan.find(0, |t, _| t == Tag::Think)?;
    let mut pos = 0;
    if first.closing {
        // Templates put `<think>` in the prompt: a lone `</think>` makes everything before it reasoning.
        take_think(
            scan,
            (0, first.end),
            (0, first.start),
            true,
            &mut pieces,
            blocks,
        );
        pos = first.end;
    }
    while let Some(open) = scan.find(pos, |t, c| t == Tag::Think && !c) {
        let Some(close) = scan.find(open.end, |t, c| t == Tag::Think && c) else {
            // No `</think>` follows, so no later `<think>` is closed either.
            if scan.is_blank(0, open.start) {
                // An unclosed leading `<think>` runs to the end of the turn.
                let (span, body) = ((open.start, scan.end), (open.end, scan.end));
                take_think(scan, span, body, false, &mut pieces, blocks);
            }
            // Otherwise it is not leading and never closed: just text. Every later `<think>`
            // is unclosed too and has this same non-blank text before it, so it is text as
            // well: stop here rather than ask again, once per `<think>`, whether the text
            // before it is blank (which made a turn of many `<think>`s quadratic).
            break;
        };
        let (span, body) = ((open.start, close.end), (open.end, close.start));
        take_think(scan, span, body, true, &mut pieces, blocks);
        pos = close.end;
    }
    if !blocks.iter().any(|b| b.tag == Tag::Think) {
        return None;
    }
    let joined: Vec<String> = pieces.into_iter().filter(|p| !p.is_empty()).collect();
    Some(joined.join("\n\n"))
}

/// Unwrap a markdown code fence around the whole (live) turn (docs/protocol.md §1.1.2). Returns true if one was removed.
pub(super) fn unwrap_fence(scan: &mut Scan<'_>) -> bool {
    let (s, e) = scan.trimmed(0, scan.end);
    if e <= s || !scan.text[s..e].starts_with("```") {
        return false;
    }
    let b = scan.text.as_bytes();
    let Some(nl) = memchr(b'\n', &b[s..e]).map(|r| s + r) else {
        return false;
    };
    let info = scan.text[s + 3..nl].trim();
    if info.contains(|c: char| c.is_whitespace() || c == '`' || c == '<') {
        return false;
    }
    let body_end = e;
    if !scan.text[nl..body_end].ends_with("```") {
        return false;
    }
    let close = body_end - 3;
    if close <= nl {
        return false;
    }
    // The closing fence must start a line.
    let line_start = scan.text[..close].trim_end_matches([' ', '\t']);
    if !line_start.ends_with('\n') {
        return false;
    }
    scan.add_mask(s, nl + 1);
    scan.add_mask(close, body_end);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_suffixes() {
        assert_eq!(partial_suffix_len("abc</act"), 5);
        assert_eq!(partial_suffix_len("abc<OBSERV"), 7);
        assert_eq!(partial_suffix_len("abc</action>"), 0);
        assert_eq!(partial_suffix_len("a <b>"), 0);
    }
}
