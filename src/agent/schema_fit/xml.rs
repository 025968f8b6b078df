//! XML answers read into JSON: elements onto the schema's properties, repeated elements to an
//! array, nested elements to an object, text coerced by the property's type.

use quick_xml::Reader;
use quick_xml::events::Event;
use serde_json::{Map, Value};

use super::{scalar, types};

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
