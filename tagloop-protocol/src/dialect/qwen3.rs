//! Qwen3-Coder: `<function=…>` and `<parameter=…>` inside `<tool_call>`.

use serde_json::{Map, Value};

use super::DialectCall;

/// A value of Qwen3-Coder's `<parameter=…>`: one leading and one trailing newline are layout.
fn layout_trimmed(s: &str) -> &str {
    let s = s
        .strip_prefix("\r\n")
        .or_else(|| s.strip_prefix('\n'))
        .unwrap_or(s);
    s.strip_suffix("\r\n")
        .or_else(|| s.strip_suffix('\n'))
        .unwrap_or(s)
}

/// `<function=tool><parameter=p>v</parameter></function>`; `None` when the text does not
/// start with `<function=`.
pub(super) fn qwen3_call(text: &str) -> Option<Result<DialectCall, String>> {
    let t = text.trim_start();
    let rest = t.strip_prefix("<function=")?;
    let Some(gt) = rest.find('>') else {
        return Some(Err("`<function=` is not closed with `>`".into()));
    };
    let tool = rest[..gt].trim().to_owned();
    let mut body = &rest[gt + 1..];
    if let Some(end) = body.find("</function>") {
        body = &body[..end];
    }
    let mut args = Map::new();
    let mut pos = 0;
    while let Some(p) = body[pos..].find("<parameter=") {
        let at = pos + p + "<parameter=".len();
        let Some(gt) = body[at..].find('>') else {
            return Some(Err("`<parameter=` is not closed with `>`".into()));
        };
        let name = body[at..at + gt].trim().to_owned();
        let vstart = at + gt + 1;
        let (value, next) = match body[vstart..].find("</parameter>") {
            Some(e) => (&body[vstart..vstart + e], vstart + e + "</parameter>".len()),
            // The last value may lose its closing tag to a stop string.
            None => (&body[vstart..], body.len()),
        };
        args.insert(name, Value::String(layout_trimmed(value).to_owned()));
        pos = next;
    }
    Some(Ok(DialectCall { tool, args }))
}
