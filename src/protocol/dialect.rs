//! Other tool-call dialects, read as actions (docs/protocol.md §1.8).
//!
//! Models trained on other formats fall back on them. When a turn has no action in tagloop's own
//! syntax, the reader also accepts, in this order of preference:
//!
//! | dialect | written as |
//! |---|---|
//! | `hermes` | `<tool_call>{"name": "read_file", "arguments": {"path": "a.txt"}}</tool_call>` (`parameters` too; arguments may be a JSON string) |
//! | `qwen3_coder` | `<tool_call><function=read_file><parameter=path>a.txt</parameter></function></tool_call>` |
//! | `function_calls` | `<function_calls><invoke name="read_file"><parameter name="path">a.txt</parameter></invoke></function_calls>` |
//! | `json_in_action` | `<action>{"name": "read_file", "arguments": {"path": "a.txt"}}</action>` (`tool`/`action`, `args`/`action_input`) |
//! | `xml_tool` | `<read_file><path>a.txt</path></read_file>`, inside `<action>` or bare when the element names a known tool |
//!
//! The call is rendered in tagloop's own syntax (`read_file(path="a.txt")`) so that the loop
//! parses and binds it like any other; JSON values keep their types, XML values are strings
//! (binding coerces them by the tool's schema). XML blocks, once isolated here, are read with
//! quick-xml: `&amp;` is `&`, CDATA is unwrapped. A block that is recognised but cannot be read
//! (bad JSON, an unclosed element) is an error the model is told about.

use serde_json::{Map, Value};

use quick_xml::Reader;
use quick_xml::events::Event;

/// A tool-call format other than tagloop's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dialect {
    /// Hermes / Qwen2.5: JSON in `<tool_call>`.
    Hermes,
    /// Qwen3-Coder: `<function=…>` and `<parameter=…>` in `<tool_call>`.
    Qwen3Coder,
    /// `<function_calls><invoke name=…>`.
    FunctionCalls,
    /// JSON inside tagloop's own `<action>`.
    JsonInAction,
    /// Cline / Roo Code style XML: `<tool><param>…</param></tool>`.
    XmlTool,
}

impl Dialect {
    /// The name reports use (`hermes`, `qwen3_coder`, …).
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Hermes => "hermes",
            Dialect::Qwen3Coder => "qwen3_coder",
            Dialect::FunctionCalls => "function_calls",
            Dialect::JsonInAction => "json_in_action",
            Dialect::XmlTool => "xml_tool",
        }
    }
}

/// A call read from a dialect: the tool and its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct DialectCall {
    /// The tool's name.
    pub tool: String,
    /// The arguments by name.
    pub args: Map<String, Value>,
}

impl DialectCall {
    /// The call in tagloop's own syntax: `tool(name=value, …)`; arguments whose names are not
    /// identifiers are passed as one object (binding spreads it).
    pub fn render(&self) -> String {
        let idents = self.args.keys().all(|k| is_ident(k));
        let mut out = format!("{}(", self.tool);
        if idents {
            for (i, (k, v)) in self.args.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(k);
                out.push('=');
                render_value(v, &mut out);
            }
        } else {
            render_value(&Value::Object(self.args.clone()), &mut out);
        }
        out.push(')');
        out
    }
}

/// What a dialect block gave: a call, or why it could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct DialectRead {
    /// The dialect.
    pub dialect: Dialect,
    /// The call, or the reason it could not be read (written for the model).
    pub call: Result<DialectCall, String>,
    /// Byte range of the block in the text it was found in.
    pub start: usize,
    /// One past the block's end (its closing tag, or the end of the text when it has none).
    pub end: usize,
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && c.all(|c| c.is_alphanumeric() || c == '_')
}

/// A tool name as the action grammar reads it (letters, digits, `_`, `.`, `-`).
fn is_tool_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
        && s.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

fn render_value(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push('"');
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                render_value(x, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, x)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                render_value(&Value::String(k.clone()), out);
                out.push_str(": ");
                render_value(x, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Find `needle` (ASCII, any case) in `hay` from `from`.
fn find_ci(hay: &str, needle: &str, from: usize) -> Option<usize> {
    let h = hay.as_bytes();
    let n = needle.as_bytes();
    if n.is_empty() || h.len() < n.len() {
        return None;
    }
    (from..=h.len() - n.len()).find(|&i| h[i..i + n.len()].eq_ignore_ascii_case(n))
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

// ---- the JSON dialects -------------------------------------------------------------------------

/// `{"name": …, "arguments": {…}}` and its variants; `None` when the text is not a JSON object
/// at all.
fn json_call(text: &str, names: &[&str], args: &[&str]) -> Option<Result<DialectCall, String>> {
    let t = text.trim();
    if !t.starts_with('{') {
        return None;
    }
    let v: Value = match serde_json::from_str(t) {
        Ok(v) => v,
        Err(e) => return Some(Err(format!("the JSON of the call is not valid: {e}"))),
    };
    let Some(obj) = v.as_object() else {
        return Some(Err("the call is not a JSON object".into()));
    };
    let Some(tool) = names
        .iter()
        .find_map(|k| obj.get(*k).and_then(Value::as_str))
    else {
        return Some(Err(format!(
            "the JSON call names no tool (expected a \"{}\" field)",
            names[0]
        )));
    };
    let arguments = args.iter().find_map(|k| obj.get(*k)).cloned();
    let arguments = match arguments {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        // Arguments given as a JSON string (OpenAI's wire format).
        Some(Value::String(s)) => match serde_json::from_str::<Value>(&s) {
            Ok(Value::Object(m)) => m,
            _ => {
                return Some(Err(format!(
                    "the arguments of `{tool}` are a string that is not a JSON object"
                )));
            }
        },
        Some(_) => {
            return Some(Err(format!(
                "the arguments of `{tool}` are not a JSON object"
            )));
        }
    };
    Some(Ok(DialectCall {
        tool: tool.to_owned(),
        args: arguments,
    }))
}

// ---- Qwen3-Coder ---------------------------------------------------------------------------------

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

fn qwen3_call(text: &str) -> Option<Result<DialectCall, String>> {
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

// ---- XML dialects (quick-xml on an isolated block) -----------------------------------------------

/// The text of an element's content: CDATA unwrapped, entities decoded; content with markup
/// inside is kept as written.
fn xml_value(raw: &str) -> String {
    let t = raw.trim();
    if let Some(inner) = t
        .strip_prefix("<![CDATA[")
        .and_then(|r| r.strip_suffix("]]>"))
        && !inner.contains("]]>")
    {
        return inner.to_owned();
    }
    if raw.contains('<') {
        return raw.to_owned();
    }
    match quick_xml::escape::unescape(raw) {
        Ok(s) => s.into_owned(),
        Err(_) => raw.to_owned(),
    }
}

fn name_of(name: &str) -> String {
    name.to_owned()
}

/// `<tool><param>value</param>…</tool>`: the first element is the tool, its children the
/// arguments (a repeated child becomes a list).
fn xml_tool_call(block: &str) -> Result<DialectCall, String> {
    let mut reader = Reader::from_str(block);
    let tool = loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => break name_of(e.name().as_ref()),
            Ok(Event::Empty(e)) => {
                return Ok(DialectCall {
                    tool: name_of(e.name().as_ref()),
                    args: Map::new(),
                });
            }
            Ok(Event::Eof) => return Err("no XML element was found".into()),
            Ok(_) => {}
            Err(e) => return Err(format!("the XML of the call is not well formed: {e}")),
        }
    };
    let mut args = Map::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                let name = name_of(e.name().as_ref());
                let end = e.to_end().into_owned();
                let raw = reader
                    .read_text(end.name())
                    .map_err(|e| format!("the value of `{name}` is not closed: {e}"))?;
                push_arg(&mut args, name, Value::String(xml_value(&raw)));
            }
            Ok(Event::Empty(e)) => {
                push_arg(
                    &mut args,
                    name_of(e.name().as_ref()),
                    Value::String(String::new()),
                );
            }
            Ok(Event::End(_)) | Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => return Err(format!("the XML of the call is not well formed: {e}")),
        }
    }
    Ok(DialectCall { tool, args })
}

fn push_arg(args: &mut Map<String, Value>, name: String, value: Value) {
    match args.get_mut(&name) {
        Some(Value::Array(items)) => items.push(value),
        Some(prev) => {
            let first = prev.take();
            *prev = Value::Array(vec![first, value]);
        }
        None => {
            args.insert(name, value);
        }
    }
}

/// `<invoke name="tool"><parameter name="p">v</parameter></invoke>` (the first invoke).
fn invoke_call(block: &str) -> Result<DialectCall, String> {
    let mut reader = Reader::from_str(block);
    let mut tool: Option<String> = None;
    let mut args = Map::new();
    let attr = |e: &quick_xml::events::BytesStart<'_>, key: &str| -> Option<String> {
        e.attributes()
            .flatten()
            .find(|a| a.key.as_ref() == key)
            .map(|a| {
                let raw = a.value.to_string();
                xml_value(&raw)
            })
    };
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) if e.name().as_ref() == "invoke" && tool.is_none() => {
                tool = attr(&e, "name");
                if tool.is_none() {
                    return Err("`<invoke>` has no name attribute".into());
                }
            }
            Ok(Event::Start(e)) if e.name().as_ref() == "parameter" && tool.is_some() => {
                let Some(name) = attr(&e, "name") else {
                    return Err("a `<parameter>` has no name attribute".into());
                };
                let end = e.to_end().into_owned();
                let raw = reader
                    .read_text(end.name())
                    .map_err(|e| format!("the value of `{name}` is not closed: {e}"))?;
                push_arg(&mut args, name, Value::String(xml_value(&raw)));
            }
            Ok(Event::End(e)) if e.name().as_ref() == "invoke" => break,
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => return Err(format!("the XML of the call is not well formed: {e}")),
        }
    }
    match tool {
        Some(tool) => Ok(DialectCall { tool, args }),
        None => Err("`<function_calls>` holds no `<invoke name=…>`".into()),
    }
}

// ---- finding a call ------------------------------------------------------------------------------

/// Read the body of tagloop's own `<action>` block when it is not in tagloop's syntax: JSON,
/// or an XML element (any name: the loop reports an unknown tool), or a whole `<tool_call>` or
/// `<function_calls>` block. `None`: not a dialect (the action grammar reads it).
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
    is_tool_name(&t[1..name_end]).then(|| (Dialect::XmlTool, xml_tool_call(t)))
}

/// The first dialect block in `text` (in order of preference: a `<tool_call>`, a
/// `<function_calls>`, an element named after a known tool). `allowed(pos)` says whether a
/// block may start at that byte (the reader excludes its own blocks: a tag mentioned in a
/// thought calls nothing).
pub fn find_block(text: &str, allowed: &dyn Fn(usize) -> bool) -> Option<DialectRead> {
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
    let (_, _, end, closed) = block(text, start, &format!("<{tool}>"), &close);
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
    use serde_json::json;

    #[test]
    fn rendering_reads_back_through_the_action_grammar() {
        let call = DialectCall {
            tool: "write_file".into(),
            args: json!({"path": "a \"b\".txt", "content": "x\ny\\z\u{1}", "n": 3, "l": [1, "t"], "o": {"k": null}})
                .as_object()
                .cloned()
                .unwrap(),
        };
        let text = call.render();
        let parsed = crate::protocol::parse_action(&text).unwrap();
        assert_eq!(parsed.tool, "write_file");
        let back: Map<String, Value> = parsed
            .args
            .into_iter()
            .map(|a| (a.name.unwrap(), a.value))
            .collect();
        assert_eq!(back, call.args);
    }
}
