//! Reading one model turn (docs/protocol.md §1.1): a hand-written, case-insensitive scan for the protocol tags.
//!
//! Model text is not XML: a bare `<` in prose or code is content, so no XML reader is used here.
//!
//! The order of work is fixed by the protocol (docs/protocol.md §1.1): `<think>` blocks are removed first, then a markdown
//! fence around the whole turn is unwrapped, then the remaining text is split into blocks. Removed
//! pieces are *masked*, never copied out, so every span still points into the original text.

use memchr::memchr;

use super::dialect::{self, Dialect};

/// A byte range `start..end` into the original turn text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

/// The protocol tags the reader knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tag {
    /// `<think>`: reasoning, removed before anything else.
    Think,
    /// `<thought>`: the model's reasoning for this step.
    Thought,
    /// `<action>`: one tool call.
    Action,
    /// `<final_answer>`: the answer.
    FinalAnswer,
    /// `<observation>`: written by the runtime only; a model that writes one has gone too far.
    Observation,
    /// `<question>`: the task, written by the runtime.
    Question,
}

impl Tag {
    /// The tag name as written between `<` and `>`.
    pub fn name(self) -> &'static str {
        match self {
            Tag::Think => "think",
            Tag::Thought => "thought",
            Tag::Action => "action",
            Tag::FinalAnswer => "final_answer",
            Tag::Observation => "observation",
            Tag::Question => "question",
        }
    }
}

/// Every protocol tag, the one list the reader, the observation renderer and the history use.
pub(crate) const ALL_TAGS: [Tag; 6] = [
    Tag::Think,
    Tag::Thought,
    Tag::Action,
    Tag::FinalAnswer,
    Tag::Observation,
    Tag::Question,
];

/// One tagged block found in the turn.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Block {
    /// Which tag opened the block.
    pub tag: Tag,
    /// The whole block, opening tag to closing tag (or to where it was cut off).
    pub span: Span,
    /// The content, trimmed of surrounding whitespace.
    pub body: Span,
    /// Whether the block had its own closing tag.
    pub closed: bool,
}

impl Block {
    /// A block of `tag` spanning `span`, its body (trimmed) at `body`.
    fn at(tag: Tag, (start, end): (usize, usize), (s, e): (usize, usize), closed: bool) -> Block {
        Block {
            tag,
            span: Span { start, end },
            body: Span { start: s, end: e },
            closed,
        }
    }
}

/// What a turn decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnKind {
    /// The turn ends in an `<action>` block.
    Action,
    /// The turn ends in a `<final_answer>` block.
    Final,
    /// Neither: the runtime sends a format reminder.
    #[default]
    None,
}

/// The result of reading a turn. Text fields are copies; spans point into the original text.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Turn {
    /// What the turn decided.
    pub kind: TurnKind,
    /// The `<thought>` blocks before the decision, joined with a blank line.
    pub thought: Option<String>,
    /// Removed `<think>` text.
    pub reasoning: Option<String>,
    /// The content of the deciding `<action>` block (trimmed), when kind is `Action`.
    pub action: Option<String>,
    /// Byte offset of [`Turn::action`] in the original text (for error offsets).
    pub action_offset: Option<usize>,
    /// The content of the deciding `<final_answer>` block (trimmed, CDATA unwrapped), when kind is `Final`.
    pub final_text: Option<String>,
    /// Text after the deciding block (or after a model-written `<observation>`), which is ignored.
    pub discarded: Option<String>,
    /// Leniencies that were needed to read the turn.
    pub warnings: Vec<String>,
    /// Every block found, in order.
    pub blocks: Vec<Block>,
    /// How many bytes of the original text belong in the history: up to the end of the deciding
    /// block, or up to where discarded text starts, or the whole text.
    pub history_end: usize,
    /// Whether the deciding block had its own closing tag (if not, the runtime puts it back in the
    /// history).
    pub deciding_closed: bool,
    /// The tool-call dialect the action was written in, when not tagloop's own
    /// (docs/protocol.md §1.8); [`Turn::action`] then holds the call in tagloop's syntax.
    pub dialect: Option<Dialect>,
    /// Why a call in another dialect could not be read (the model is told).
    pub dialect_error: Option<String>,
}

/// Characters that are invisible and carry no meaning outside tags: a byte-order mark and the
/// zero-width family. They are trimmed like whitespace.
fn is_ignorable(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '\u{feff}' | '\u{200b}' | '\u{200c}' | '\u{200d}' | '\u{2060}'
        )
}

/// Trim whitespace and invisible characters from both ends of `text[a..b]`; returns the new range.
fn trim_range(text: &str, a: usize, b: usize) -> (usize, usize) {
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
fn partial_suffix_len(text: &str) -> usize {
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

/// A found tag: where it starts, what it is, where it ends.
#[derive(Debug, Clone, Copy)]
struct Found {
    start: usize,
    tag: Tag,
    closing: bool,
    end: usize,
}

/// The scanner state: the text, the live end, and masked (removed) ranges.
struct Scan<'a> {
    text: &'a str,
    end: usize,
    /// Sorted, non-overlapping removed ranges.
    masks: Vec<(usize, usize)>,
}

impl<'a> Scan<'a> {
    fn masked(&self, i: usize) -> Option<usize> {
        self.masks
            .iter()
            .find(|&&(a, b)| a <= i && i < b)
            .map(|&(_, b)| b)
    }

    fn add_mask(&mut self, a: usize, b: usize) {
        if a < b {
            self.masks.push((a, b));
            self.masks.sort_unstable();
        }
    }

    /// The next tag from `from` (not inside a masked range) that `want` accepts.
    fn find(&self, from: usize, want: impl Fn(Tag, bool) -> bool) -> Option<Found> {
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
    fn pieces(&self, a: usize, b: usize) -> Vec<(usize, usize)> {
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
    fn live(&self, a: usize, b: usize) -> String {
        let mut s = String::new();
        for (x, y) in self.pieces(a, b) {
            s.push_str(&self.text[x..y]);
        }
        s
    }

    /// The live range of `a..b` trimmed at both ends (masked pieces in the middle stay masked).
    fn trimmed(&self, a: usize, b: usize) -> (usize, usize) {
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

    fn is_blank(&self, a: usize, b: usize) -> bool {
        let (s, e) = self.trimmed(a, b);
        s >= e
    }
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
fn remove_think(scan: &mut Scan<'_>, blocks: &mut Vec<Block>) -> Option<String> {
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
    let mut no_more_close = false;
    while let Some(open) = scan.find(pos, |t, c| t == Tag::Think && !c) {
        let close = if no_more_close {
            None
        } else {
            scan.find(open.end, |t, c| t == Tag::Think && c)
        };
        match close {
            Some(close) => {
                let (span, body) = ((open.start, close.end), (open.end, close.start));
                take_think(scan, span, body, true, &mut pieces, blocks);
                pos = close.end;
            }
            None => {
                no_more_close = true;
                if scan.is_blank(0, open.start) {
                    // An unclosed leading `<think>` runs to the end of the turn.
                    let (span, body) = ((open.start, scan.end), (open.end, scan.end));
                    take_think(scan, span, body, false, &mut pieces, blocks);
                    break;
                }
                // Not leading and never closed: it is just text.
                pos = open.end;
            }
        }
    }
    if !blocks.iter().any(|b| b.tag == Tag::Think) {
        return None;
    }
    let joined: Vec<String> = pieces.into_iter().filter(|p| !p.is_empty()).collect();
    Some(joined.join("\n\n"))
}

/// Unwrap a markdown code fence around the whole (live) turn (docs/protocol.md §1.1.2). Returns true if one was removed.
fn unwrap_fence(scan: &mut Scan<'_>) -> bool {
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

/// Discarded text that is only the end of a markdown fence (```` ``` ````) is not worth reporting.
fn only_fence(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c == '`' || is_ignorable(c))
}

/// Read one model turn.
///
/// ```
/// use tagloop::protocol::{read_turn, TurnKind};
///
/// let turn = read_turn("<thought>Look it up.</thought>\n<action>search(q=\"x\")</action>\n<observation>fake");
/// assert_eq!(turn.kind, TurnKind::Action);
/// assert_eq!(turn.thought.as_deref(), Some("Look it up."));
/// assert_eq!(turn.action.as_deref(), Some("search(q=\"x\")"));
/// assert_eq!(turn.discarded.as_deref(), Some("<observation>fake"));
/// ```
pub fn read_turn(text: &str) -> Turn {
    read_turn_with(text, &[])
}

/// [`read_turn`], also reading a bare XML element named after one of `tools` as a call
/// (`<read_file><path>a.txt</path></read_file>`, docs/protocol.md §1.8).
///
/// ```
/// use tagloop::protocol::{Dialect, TurnKind, read_turn_with};
///
/// let turn = read_turn_with("<read_file><path>a &amp; b.txt</path></read_file>", &["read_file"]);
/// assert_eq!(turn.kind, TurnKind::Action);
/// assert_eq!(turn.dialect, Some(Dialect::XmlTool));
/// assert_eq!(turn.action.as_deref(), Some("read_file(path=\"a & b.txt\")"));
/// ```
pub fn read_turn_with(text: &str, tools: &[&str]) -> Turn {
    let partial = partial_suffix_len(text);
    let end = text.len() - partial;
    let mut scan = Scan {
        text,
        end,
        masks: Vec::new(),
    };
    let mut blocks = Vec::new();
    let mut warnings = Vec::new();

    let reasoning = remove_think(&mut scan, &mut blocks);
    if unwrap_fence(&mut scan) {
        warnings.push("markdown code fence around the turn removed".to_string());
    }

    let mut thoughts: Vec<String> = Vec::new();
    let mut turn = Turn {
        reasoning,
        history_end: end,
        ..Turn::default()
    };

    let mut pos = 0;
    let mut discard_from = None;
    while let Some(open) = scan.find(pos, |t, c| !c && t != Tag::Think) {
        match open.tag {
            Tag::Thought => {
                pos = read_thought(&scan, &open, &mut thoughts, &mut blocks, &mut warnings);
            }
            Tag::Action | Tag::FinalAnswer => {
                discard_from = Some(read_decision(&scan, &open, &mut turn, &mut blocks));
                break;
            }
            Tag::Observation | Tag::Question => {
                // The model wrote what only the runtime writes: the turn ends here.
                let (body_end, span_end, closed) = closed_or_open(&scan, &open, scan.end);
                let (s, e) = scan.trimmed(open.end, body_end);
                blocks.push(Block::at(open.tag, (open.start, span_end), (s, e), closed));
                turn.history_end = open.start;
                discard_from = Some(open.start);
                break;
            }
            Tag::Think => pos = open.end,
        }
    }

    match turn.kind {
        TurnKind::Action => action_dialect(&mut turn, &mut warnings),
        TurnKind::None => {
            if let Some(at) = bare_dialect(&scan, &blocks, discard_from, tools, &mut turn) {
                discard_from = Some(at);
                if let Some(d) = turn.dialect {
                    warnings.push(format!("the call was written in the {} dialect", d.name()));
                    let block = &text[turn.action_offset.unwrap_or(0)..at];
                    if d == Dialect::FunctionCalls && block.matches("<invoke").count() > 1 {
                        warnings.push(
                            "only the first <invoke> of the block runs; the others were ignored"
                                .to_string(),
                        );
                    }
                }
            }
        }
        TurnKind::Final => {}
    }
    if let Some(from) = discard_from {
        let (s, e) = scan.trimmed(from, scan.end);
        let rest = scan.live(s, e);
        if !rest.is_empty() && !only_fence(&rest) {
            turn.discarded = Some(rest);
        }
    }
    if partial > 0 {
        // A stop string's beginning that a streamed server left at the end (docs/protocol.md §1.1.5).
        let cut = &text[end..];
        warnings.push(format!(
            "the partial tag `{cut}` at the end of the turn was removed"
        ));
        match &mut turn.discarded {
            Some(d) => d.push_str(cut),
            None => turn.discarded = Some(cut.to_string()),
        }
    }
    let thoughts: Vec<String> = thoughts.into_iter().filter(|t| !t.is_empty()).collect();
    if !thoughts.is_empty() {
        turn.thought = Some(thoughts.join("\n\n"));
    }
    blocks.sort_by_key(|b| b.span.start);
    turn.blocks = blocks;
    turn.warnings = warnings;
    turn
}

/// An `<action>` whose body is another dialect (JSON, an XML element, a `<tool_call>`): the
/// call is rendered in tagloop's syntax, or the reason it cannot be read is kept.
fn action_dialect(turn: &mut Turn, warnings: &mut Vec<String>) {
    let Some((d, call)) = turn.action.as_deref().and_then(dialect::read_action_body) else {
        return;
    };
    turn.dialect = Some(d);
    match call {
        Ok(call) => {
            let rendered = call.render();
            warnings.push(format!(
                "the action was written in the {} dialect; read as {rendered}",
                d.name()
            ));
            turn.action = Some(rendered);
        }
        Err(e) => turn.dialect_error = Some(e),
    }
}

/// A turn with no decision of its own may hold a call in another dialect outside tagloop's
/// blocks (a tag mentioned in a thought calls nothing) and before a model-written
/// `<observation>`. Returns where the discarded rest starts.
fn bare_dialect(
    scan: &Scan<'_>,
    blocks: &[Block],
    discard_from: Option<usize>,
    tools: &[&str],
    turn: &mut Turn,
) -> Option<usize> {
    let limit = discard_from.unwrap_or(scan.end);
    let allowed = |p: usize| {
        p < limit
            && scan.masked(p).is_none()
            && !blocks.iter().any(|b| b.span.start <= p && p < b.span.end)
    };
    let found = dialect::find_known(&scan.text[..scan.end], &allowed, tools)?;
    turn.kind = TurnKind::Action;
    turn.dialect = Some(found.dialect);
    turn.action_offset = Some(found.start);
    match found.call {
        Ok(call) => turn.action = Some(call.render()),
        Err(e) => {
            turn.action = Some(scan.text[found.start..found.end].to_string());
            turn.dialect_error = Some(e);
        }
    }
    turn.history_end = found.end;
    turn.deciding_closed = true;
    Some(found.end)
}

/// Where the block opened at `open` ends: at its closing tag (body end, block end, closed), or,
/// when it has none, at `stop` (open).
fn closed_or_open(scan: &Scan<'_>, open: &Found, stop: usize) -> (usize, usize, bool) {
    match scan.find(open.end, |t, c| t == open.tag && c) {
        Some(c) => (c.start, c.end, true),
        None => (stop, stop, false),
    }
}

/// A `<thought>` block: its text joins the thoughts. One that is never closed ends at the next
/// tag that decides or ends the turn (docs/protocol.md §1.1.5). Returns where reading goes on.
fn read_thought(
    scan: &Scan<'_>,
    open: &Found,
    thoughts: &mut Vec<String>,
    blocks: &mut Vec<Block>,
    warnings: &mut Vec<String>,
) -> usize {
    let next_tag = scan.find(open.end, |t, c| {
        !c && matches!(
            t,
            Tag::Action | Tag::FinalAnswer | Tag::Observation | Tag::Question
        )
    });
    let stop = next_tag.map_or(scan.end, |f| f.start);
    let (body_end, span_end, closed) = closed_or_open(scan, open, stop);
    if !closed && stop < scan.end {
        warnings.push("unclosed <thought> ended at the next tag".to_string());
    }
    let (s, e) = scan.trimmed(open.end, body_end);
    thoughts.push(scan.live(s, e));
    blocks.push(Block::at(
        Tag::Thought,
        (open.start, span_end),
        (s, e),
        closed,
    ));
    span_end
}

/// The deciding `<action>` or `<final_answer>` block (docs/protocol.md §1.1.6): an action with no
/// closing tag also ends where the model starts its own `<observation>`. Returns where the
/// discarded rest of the turn starts.
fn read_decision(scan: &Scan<'_>, open: &Found, turn: &mut Turn, blocks: &mut Vec<Block>) -> usize {
    let stop = if open.tag == Tag::Action {
        let obs = scan.find(open.end, |t, c| t == Tag::Observation && !c);
        obs.map_or(scan.end, |f| f.start)
    } else {
        scan.end
    };
    let (body_end, span_end, closed) = closed_or_open(scan, open, stop);
    let (s, e) = scan.trimmed(open.end, body_end);
    let body = scan.live(s, e);
    blocks.push(Block::at(open.tag, (open.start, span_end), (s, e), closed));
    if open.tag == Tag::Action {
        turn.kind = TurnKind::Action;
        turn.action = Some(body);
        turn.action_offset = Some(s);
    } else {
        turn.kind = TurnKind::Final;
        turn.final_text = Some(unwrap_cdata(&body).to_string());
    }
    turn.deciding_closed = closed;
    turn.history_end = if closed { span_end } else { e.max(open.end) };
    span_end
}

/// A final answer that is exactly one `<![CDATA[…]]>` section is unwrapped (docs/protocol.md §1.1.4).
pub(crate) fn unwrap_cdata(s: &str) -> &str {
    if let Some(inner) = s
        .strip_prefix("<![CDATA[")
        .and_then(|r| r.strip_suffix("]]>"))
        && !inner.contains("]]>")
    {
        return inner;
    }
    s
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
