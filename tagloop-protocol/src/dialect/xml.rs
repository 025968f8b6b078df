//! What the XML dialects share, once a block is isolated and read with quick-xml: element
//! values and repeated arguments.

use serde_json::{Map, Value};

/// The text of an element's content: CDATA unwrapped, entities decoded; content with markup
/// inside is kept as written.
pub(super) fn xml_value(raw: &str) -> String {
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

/// An element or attribute name as an owned string.
pub(super) fn name_of(name: &str) -> String {
    name.to_owned()
}

/// Add an argument; a repeated name becomes a list of its values.
pub(super) fn push_arg(args: &mut Map<String, Value>, name: String, value: Value) {
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
