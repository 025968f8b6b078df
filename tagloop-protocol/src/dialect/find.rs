//! Finding a call in another dialect: in the body of tagloop's own `<action>`, or bare in a
//! turn that has no action of its own.

use super::invoke::invoke_call;
use super::json::json_call;
use super::qwen3::qwen3_call;
use super::xml_tool::xml_tool_call;
use super::{Dialect, DialectCall, DialectRead};
use crate::steps;

/// A tool name as the action grammar reads it (letters, digits, `_`, `.`, `-`).
fn is_tool_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
        && s.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Find `needle` (ASCII, any case) in `hay` from `from`: the first byte is found with memchr
/// (either case), and only there is the rest compared, so a search costs about one look at each
/// byte it passes.
fn find_ci(hay: &str, needle: &str, from: usize) -> Option<usize> {
    let h = hay.as_bytes();
    let n = needle.as_bytes();
    let (&first, _) = n.split_first()?;
    let last_start = h.len().checked_sub(n.len())?;
    let mut i = from;
    while i <= last_start {
        let Some(rel) = memchr::memchr2(
            first.to_ascii_lowercase(),
            first.to_ascii_uppercase(),
            &h[i..=last_start],
        ) else {
            steps::step(last_start + 1 - i);
            return None;
        };
        steps::step(rel + 1);
        let at = i + rel;
        if h[at..at + n.len()].eq_ignore_ascii_case(n) {
            return Some(at);
        }
        i = at + 1;
    }
    None
}

/// The content of the block opened by `open` at `start` (which holds `open`): up to its
/// `close` tag, or the end of the text. Returns (content start, content end, block end, closed).
fn block(text: &str, start: usize, open: &str, close: &str) -> (usize, usize, usize, bool) {
    let body = start + open.len();
    match find_ci(text, close, body) {
        Some(c) => (body, c, c + close.len(), true),
        None => (body, text.len(), text.len(), false),
    }
}

/// [`block`] for an element named after a tool, whose arguments may carry the same name
/// (`<n><n>1</n></n>`): the close that balances the opening tag, or — when none balances (an
/// outer close lost to a stop string) — the first close, as [`block`] would.
fn nested_block(text: &str, start: usize, open: &str, close: &str) -> (usize, usize, usize, bool) {
    let body = start + open.len();
    let mut depth = 1usize;
    let mut at = body;
    let mut next_open = find_ci(text, open, body);
    while let Some(c) = find_ci(text, close, at) {
        // Every opening of the same name before this close goes one level deeper.
        while let Some(o) = next_open.filter(|&o| o < c) {
            depth += 1;
            next_open = find_ci(text, open, o + open.len());
        }
        depth -= 1;
        if depth == 0 {
            return (body, c, c + close.len(), true);
        }
        at = c + close.len();
    }
    block(text, start, open, close)
}

/// Read the body of tagloop's own `<action>` block when it is not in tagloop's syntax: JSON,
/// or an XML element (any name: the loop reports an unknown tool), or a whole `<tool_call>` or
/// `<function_calls>` block, or an `<invoke name=…>` element alone (the `function_calls`
/// dialect without its wrapper). `None`: not a dialect (the action grammar reads it).
pub fn read_action_body(body: &str) -> Option<(Dialect, Result<DialectCall, String>)> {
    let t = body.trim();
    if t.starts_with('{') {
        return json_call(
            t,
            &["name", "tool", "action"],
            &["arguments", "args", "action_input", "parameters"],
        )
        .map(|r| (Dialect::JsonInAction, r));
    }
    if !t.starts_with('<') {
        return None;
    }
    if let Some(found) = find_block(t, &|_| true)
        && found.start == 0
    {
        return Some((found.dialect, found.call));
    }
    let name_end = t[1..]
        .find(|c: char| c == '>' || c == '/' || c.is_whitespace())
        .map(|i| i + 1)?;
    let name = &t[1..name_end];
    // `<invoke name="tool">…</invoke>` is the inside of a `<function_calls>` block written
    // without it: read it as that dialect, or it would be a call of a tool named `invoke`
    // with an argument `parameter`. A bare `<invoke>` (no attributes) is still an element
    // named after a tool, for a tool that really is called `invoke`.
    if name == "invoke" && t[name_end..].starts_with(char::is_whitespace) {
        return Some((Dialect::FunctionCalls, invoke_call(t)));
    }
    is_tool_name(name).then(|| (Dialect::XmlTool, xml_tool_call(t)))
}

/// The first dialect block in `text` (in order of preference: a `<tool_call>`, a
/// `<function_calls>`, an element named after a known tool). `allowed(pos)` says whether a
/// block may start at that byte (the reader excludes its own blocks: a tag mentioned in a
/// thought calls nothing).
fn find_block(text: &str, allowed: &dyn Fn(usize) -> bool) -> Option<DialectRead> {
    find_known(text, allowed, &[])
}

/// [`find_block`], also reading bare elements named after one of `tools`.
pub fn find_known(
    text: &str,
    allowed: &dyn Fn(usize) -> bool,
    tools: &[&str],
) -> Option<DialectRead> {
    let first = |tag: &str| {
        let mut from = 0;
        while let Some(p) = find_ci(text, tag, from) {
            if allowed(p) {
                return Some(p);
            }
            from = p + 1;
        }
        None
    };
    if let Some(start) = first("<tool_call>") {
        // A JSON call whose block lost its closing tag to a stop string still counts.
        let (s, e, end, _) = block(text, start, "<tool_call>", "</tool_call>");
        let body = &text[s..e];
        if let Some(call) = json_call(body, &["name"], &["arguments", "parameters"]) {
            return Some(DialectRead {
                dialect: Dialect::Hermes,
                call,
                start,
                end,
            });
        }
        if let Some(call) = qwen3_call(body) {
            return Some(DialectRead {
                dialect: Dialect::Qwen3Coder,
                call,
                start,
                end,
            });
        }
        // Anything else inside <tool_call> (tagloop's own syntax, prose) is not a call.
    }
    if let Some(start) = first("<function_calls>") {
        let (s, e, end, _) = block(text, start, "<function_calls>", "</function_calls>");
        return Some(DialectRead {
            dialect: Dialect::FunctionCalls,
            call: invoke_call(&text[s..e]),
            start,
            end,
        });
    }
    let mut best: Option<(usize, &str)> = None;
    for tool in tools {
        let open = format!("<{tool}>");
        if let Some(p) = first(&open)
            && best.is_none_or(|(b, _)| p < b)
        {
            best = Some((p, tool));
        }
    }
    let (start, tool) = best?;
    let close = format!("</{tool}>");
    let (_, _, end, closed) = nested_block(text, start, &format!("<{tool}>"), &close);
    let call = if closed {
        xml_tool_call(&text[start..end])
    } else {
        Err(format!("`<{tool}>` is never closed with `{close}`"))
    };
    Some(DialectRead {
        dialect: Dialect::XmlTool,
        call,
        start,
        end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_argument_named_like_its_tool_does_not_close_the_call() {
        let text = "<n><n>1</n><a>2</a></n> after";
        let read = find_known(text, &|_| true, &["n"]).expect("a call");
        assert_eq!(&text[read.start..read.end], "<n><n>1</n><a>2</a></n>");
        let call = read.call.expect("well formed");
        assert_eq!(call.args.len(), 2);
    }

    #[test]
    fn an_unbalanced_call_still_closes_at_its_first_close() {
        let text = "<n><n>1</n><a>2</a>";
        let read = find_known(text, &|_| true, &["n"]).expect("a call");
        assert_eq!(&text[read.start..read.end], "<n><n>1</n>");
    }
}
