//! Fitting a final answer to the role's schema (docs/protocol.md §1.5): XML answers read into
//! JSON, and the coercions a validator would otherwise refuse.
//!
//! Small models asked for JSON often answer in XML (`<name>Ana</name><count>2</count>`). The
//! elements are mapped onto the schema: an element to the property of its name, repeated
//! elements to an array, nested elements to an object, text coerced by the property's type.
//! Then, for XML and JSON answers alike, schema-guided coercions fix what is plainly meant: a
//! number written as a string, `"true"`/`"false"` as strings, a single value where an array is
//! expected. Each one is reported. Nothing is guessed: a missing field stays missing.

use quick_xml::Reader;
use quick_xml::events::Event;
use serde_json::{Map, Number, Value};

/// One XML element: its name, its children, and its text.
#[derive(Debug, Default)]
struct Node {
    name: String,
    children: Vec<Node>,
    text: String,
}

/// Parse well-formed XML elements (one or several at the top) into a tree under a nameless
/// root; `None` when the text is not well-formed XML elements.
fn parse(body: &str) -> Option<Node> {
    let t = body.trim();
    if !t.starts_with('<') || t.starts_with("<![CDATA[") {
        return None;
    }
    let wrapped = format!("<tagloop-root>{t}</tagloop-root>");
    let mut reader = Reader::from_str(&wrapped);
    let mut stack: Vec<Node> = Vec::new();
    let mut root: Option<Node> = None;
    loop {
        match reader.read_event().ok()? {
            Event::Start(e) => stack.push(Node {
                name: e.name().as_ref().to_owned(),
                ..Node::default()
            }),
            Event::Empty(e) => stack.last_mut()?.children.push(Node {
                name: e.name().as_ref().to_owned(),
                ..Node::default()
            }),
            Event::End(_) => {
                let done = stack.pop()?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(done),
                    None => root = Some(done),
                }
            }
            Event::Text(e) => stack.last_mut()?.text.push_str(&e.xml10_content()),
            Event::CData(e) => stack.last_mut()?.text.push_str(&e.xml10_content()),
            Event::GeneralRef(e) => {
                let entity = format!("&{};", &*e);
                let resolved = quick_xml::escape::unescape(&entity).ok()?;
                stack.last_mut()?.text.push_str(&resolved);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    let root = root?;
    (!root.children.is_empty()).then_some(root)
}

/// The types a schema allows (`type` as a string or a list; none: any).
fn types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ if schema.get("properties").is_some() => vec!["object"],
        _ if schema.get("items").is_some() => vec!["array"],
        _ => Vec::new(),
    }
}

/// Read an XML answer into the JSON the schema describes; `None` when the answer is not XML
/// elements or the schema's top level is not an object or an array.
pub(crate) fn xml_answer(body: &str, schema: &Value) -> Option<Value> {
    let root = parse(body)?;
    let t = types(schema);
    if t.contains(&"object") {
        let props = schema.get("properties").and_then(Value::as_object);
        let names_match =
            |n: &Node| props.is_some_and(|p| n.children.iter().any(|c| p.contains_key(&c.name)));
        // `<person><name>…</name></person>`: one wrapper around the fields.
        let node = match root.children.as_slice() {
            [only] if !names_match(&root) && names_match(only) => only,
            _ => &root,
        };
        return Some(object(node, schema));
    }
    if t.contains(&"array") {
        let items = schema.get("items").cloned().unwrap_or(Value::Bool(true));
        let node = match root.children.as_slice() {
            [only] if !only.children.is_empty() => only,
            _ => &root,
        };
        return Some(Value::Array(
            node.children
                .iter()
                .map(|c| node_value(c, &items))
                .collect(),
        ));
    }
    None
}

fn object(node: &Node, schema: &Value) -> Value {
    let mut out = Map::new();
    let empty = Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for (name, prop) in props {
        let matching: Vec<&Node> = node.children.iter().filter(|c| &c.name == name).collect();
        if matching.is_empty() {
            continue;
        }
        let value = if types(prop).contains(&"array") {
            let items = prop.get("items").cloned().unwrap_or(Value::Bool(true));
            match matching.as_slice() {
                // `<tags><tag>a</tag><tag>b</tag></tags>`: one element wrapping the items.
                [one] if !one.children.is_empty() => {
                    Value::Array(one.children.iter().map(|c| node_value(c, &items)).collect())
                }
                _ => Value::Array(matching.iter().map(|c| node_value(c, &items)).collect()),
            }
        } else {
            node_value(matching[0], prop)
        };
        out.insert(name.clone(), value);
    }
    // Elements the schema does not name are kept as text, for the validator to judge.
    for c in &node.children {
        if !props.contains_key(&c.name) && !out.contains_key(&c.name) {
            out.insert(c.name.clone(), node_value(c, &Value::Bool(true)));
        }
    }
    Value::Object(out)
}

fn node_value(node: &Node, schema: &Value) -> Value {
    let t = types(schema);
    if !node.children.is_empty() {
        if t.contains(&"array") {
            let items = schema.get("items").cloned().unwrap_or(Value::Bool(true));
            return Value::Array(
                node.children
                    .iter()
                    .map(|c| node_value(c, &items))
                    .collect(),
            );
        }
        return object(node, schema);
    }
    let text = node.text.trim();
    scalar(text, &t).unwrap_or_else(|| Value::String(text.to_owned()))
}

/// Text as the first of the allowed scalar types it reads as.
fn scalar(text: &str, types: &[&str]) -> Option<Value> {
    for t in types {
        let v = match *t {
            "integer" => text.parse::<i64>().ok().map(Value::from),
            "number" => text
                .parse::<f64>()
                .ok()
                .and_then(Number::from_f64)
                .map(|n| {
                    text.parse::<i64>()
                        .map(Value::from)
                        .unwrap_or(Value::Number(n))
                }),
            "boolean" => match text.to_ascii_lowercase().as_str() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            "null" if text.is_empty() || text == "null" => Some(Value::Null),
            "string" => Some(Value::String(text.to_owned())),
            _ => None,
        };
        if v.is_some() {
            return v;
        }
    }
    None
}

/// Schema-guided coercions of a value: a number or a boolean written as a string, and a single
/// value where an array is expected. Each applied coercion is described in `notes` (with its
/// path).
pub(crate) fn coerce(value: Value, schema: &Value, path: &str, notes: &mut Vec<String>) -> Value {
    let t = types(schema);
    let at = if path.is_empty() { "(root)" } else { path };
    match value {
        Value::String(s) if !t.is_empty() && !t.contains(&"string") => match scalar(s.trim(), &t) {
            Some(v) if !v.is_string() => {
                notes.push(format!("{at}: the string {s:?} was read as {v}"));
                v
            }
            _ if t.contains(&"array") => wrap(Value::String(s), schema, path, notes),
            _ => Value::String(s),
        },
        Value::Object(map) => {
            let empty = Map::new();
            let props = schema
                .get("properties")
                .and_then(Value::as_object)
                .unwrap_or(&empty);
            if !t.is_empty() && !t.contains(&"object") && t.contains(&"array") {
                return wrap(Value::Object(map), schema, path, notes);
            }
            Value::Object(
                map.into_iter()
                    .map(|(k, v)| {
                        let v = match props.get(&k) {
                            Some(p) => coerce(v, p, &format!("{path}/{k}"), notes),
                            None => v,
                        };
                        (k, v)
                    })
                    .collect(),
            )
        }
        Value::Array(items) => {
            let item_schema = schema.get("items").cloned().unwrap_or(Value::Bool(true));
            Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| coerce(v, &item_schema, &format!("{path}/{i}"), notes))
                    .collect(),
            )
        }
        v if !t.is_empty() && t == ["array"] && !v.is_null() => wrap(v, schema, path, notes),
        v => v,
    }
}

fn wrap(v: Value, schema: &Value, path: &str, notes: &mut Vec<String>) -> Value {
    let at = if path.is_empty() { "(root)" } else { path };
    notes.push(format!("{at}: a single value was read as a list of one"));
    let item_schema = schema.get("items").cloned().unwrap_or(Value::Bool(true));
    Value::Array(vec![coerce(v, &item_schema, &format!("{path}/0"), notes)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn person() -> Value {
        json!({"type": "object", "properties": {
            "name": {"type": "string"}, "count": {"type": "integer"},
            "ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}},
            "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}}}},
            "required": ["name", "count"]})
    }

    #[test]
    fn xml_elements_fill_the_schema() {
        let v = xml_answer(
            "<name>Ana &amp; Bo</name>\n<count>2</count><ok>true</ok><tags>x</tags><tags><![CDATA[<y>]]></tags>\
             <address><city>Lyon</city><zip>69001</zip></address>",
            &person(),
        );
        assert_eq!(
            v,
            Some(
                json!({"name": "Ana & Bo", "count": 2, "ok": true, "tags": ["x", "<y>"],
                        "address": {"city": "Lyon", "zip": 69001}})
            )
        );
        // One wrapper element around the fields, and a list wrapped in its own element.
        let v = xml_answer(
            "<person><name>Ana</name><count>x</count><tags><t>a</t><t>b</t></tags></person>",
            &person(),
        );
        assert_eq!(
            v,
            Some(json!({"name": "Ana", "count": "x", "tags": ["a", "b"]}))
        );
        // Missing fields are not invented; text that is not XML is not read.
        assert_eq!(
            xml_answer("<name>Ana</name>", &person()),
            Some(json!({"name": "Ana"}))
        );
        assert_eq!(xml_answer("Ana, 2", &person()), None);
        assert_eq!(xml_answer("<name>Ana</nam>", &person()), None);
        let list = json!({"type": "array", "items": {"type": "number"}});
        assert_eq!(
            xml_answer("<n>1</n><n>2.5</n>", &list),
            Some(json!([1, 2.5]))
        );
    }

    /// Any object of the schema's shape, written as XML elements (escaped, some values in
    /// CDATA, with or without a wrapper element), reads back as itself.
    mod props {
        use super::*;
        use proptest::prelude::*;

        fn escape(s: &str) -> String {
            s.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
        }

        proptest! {
            #[test]
            fn xml_answers_read_back_as_the_object(
                name in "[a-zA-Z &<>\"'é]{1,12}",
                count in any::<i32>(),
                ok in any::<bool>(),
                tags in proptest::collection::vec("[a-z<&]{1,6}", 0..4),
                city in proptest::option::of("[A-Za-z ]{1,8}"),
                wrapper in any::<bool>(),
                cdata in any::<bool>(),
            ) {
                let text = |s: &str| if cdata && !s.contains("]]>") { format!("<![CDATA[{s}]]>") } else { escape(s) };
                let mut xml = format!("<name>{}</name><count>{count}</count><ok>{ok}</ok>", text(&name));
                for t in &tags {
                    xml.push_str(&format!("<tags>{}</tags>", text(t)));
                }
                if let Some(c) = &city {
                    xml.push_str(&format!("<address><city>{}</city></address>", text(c)));
                }
                if wrapper {
                    xml = format!("<person>\n{xml}\n</person>");
                }
                let mut want = json!({"name": name.trim(), "count": count, "ok": ok});
                if !tags.is_empty() {
                    want["tags"] = json!(tags);
                }
                if let Some(c) = &city {
                    want["address"] = json!({"city": c.trim()});
                }
                prop_assert_eq!(xml_answer(&xml, &person()), Some(want), "{}", xml);
            }
        }
    }

    #[test]
    fn coercions_are_applied_and_reported() {
        let mut notes = Vec::new();
        let v = coerce(
            json!({"name": "Ana", "count": "3", "ok": "false", "tags": "solo", "address": {"zip": "7"}}),
            &person(),
            "",
            &mut notes,
        );
        assert_eq!(
            v,
            json!({"name": "Ana", "count": 3, "ok": false, "tags": ["solo"], "address": {"zip": 7}})
        );
        assert_eq!(notes.len(), 4, "{notes:?}");
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("/count: the string \"3\""))
        );
        // Nothing to do: nothing reported; a string that is not a number stays.
        let mut notes = Vec::new();
        let v = coerce(
            json!({"name": "1", "count": "many"}),
            &person(),
            "",
            &mut notes,
        );
        assert_eq!(v, json!({"name": "1", "count": "many"}));
        assert!(notes.is_empty());
    }
}
