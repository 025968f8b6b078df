//! Reading the blocks of a prepared turn (docs/protocol.md §1.1): thoughts, the deciding
//! `<action>` or `<final_answer>`, a model-written `<observation>`, and a call in another dialect.

use super::prepare::{partial_suffix_len, remove_think, unwrap_fence};
use super::scan::{Ahead, Found, Scan, covering, is_ignorable, merged};
use super::types::{Block, Tag, Turn, TurnKind};
use crate::dialect::{self, Dialect};

/// Discarded text that is only the end of a markdown fence (```` ``` ````) is not worth reporting.
fn only_fence(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c == '`' || is_ignorable(c))
}

/// Read one model turn.
///
/// ```
/// use tagloop_protocol::{read_turn, TurnKind};
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
/// use tagloop_protocol::{Dialect, TurnKind, read_turn_with};
///
/// let turn = read_turn_with("<read_file><path>a &amp; b.txt</path></read_file>", &["read_file"]);
/// assert_eq!(turn.kind, TurnKind::Action);
/// assert_eq!(turn.dialect, Some(Dialect::XmlTool));
/// assert_eq!(turn.action.as_deref(), Some("read_file(path=\"a & b.txt\")"));
/// ```
pub fn read_turn_with(text: &str, tools: &[&str]) -> Turn {
    let partial = partial_suffix_len(text);
    let end = text.len() - partial;
    let mut scan = Scan::new(text, end);
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
    // The next tag that decides or ends the turn, where an unclosed thought stops.
    let mut deciding = Ahead::new(|t, c| {
        !c && matches!(
            t,
            Tag::Action | Tag::FinalAnswer | Tag::Observation | Tag::Question
        )
    });
    while let Some(open) = scan.find(pos, |t, c| !c && t != Tag::Think) {
        match open.tag {
            Tag::Thought => {
                pos = read_thought(
                    &scan,
                    &open,
                    &mut deciding,
                    &mut thoughts,
                    &mut blocks,
                    &mut warnings,
                );
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
    // Removed text and tagloop's own blocks, merged once so that each candidate is a binary
    // search rather than a walk over every block (a turn can hold thousands of thoughts, each
    // mentioning `<tool_call>`).
    let mut taken: Vec<(usize, usize)> =
        blocks.iter().map(|b| (b.span.start, b.span.end)).collect();
    taken.extend_from_slice(scan.masks());
    let taken = merged(taken);
    let allowed = |p: usize| p < limit && covering(&taken, p).is_none();
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
    deciding: &mut Ahead<impl Fn(Tag, bool) -> bool>,
    thoughts: &mut Vec<String>,
    blocks: &mut Vec<Block>,
    warnings: &mut Vec<String>,
) -> usize {
    let next_tag = deciding.next(scan, open.end);
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

/// The text inside `s` when `s` is exactly one `<![CDATA[…]]>` section, else `s`
/// unchanged: how the reader unwraps a final answer (docs/protocol.md §1.1.4). The runtime
/// applies it again to a final answer it checks against a schema.
pub fn unwrap_cdata(s: &str) -> &str {
    if let Some(inner) = s
        .strip_prefix("<![CDATA[")
        .and_then(|r| r.strip_suffix("]]>"))
        && !inner.contains("]]>")
    {
        return inner;
    }
    s
}
