//! Fitting a final answer to the role's schema (docs/protocol.md §1.5): XML answers read into
//! JSON, and the coercions a validator would otherwise refuse.
//!
//! Small models asked for JSON often answer in XML (`<name>Ana</name><count>2</count>`). The
//! elements are mapped onto the schema: an element to the property of its name, repeated
//! elements to an array, nested elements to an object, text coerced by the property's type.
//! Then, for XML and JSON answers alike, schema-guided coercions fix what is plainly meant: a
//! number written as a string, `"true"`/`"false"` as strings, a single value where an array is
//! expected. Each one is reported. Nothing is guessed: a missing field stays missing.

use serde_json::{Number, Value};

mod coerce;
#[cfg(test)]
mod tests;
mod xml;

pub(crate) use coerce::coerce;
pub(crate) use xml::xml_answer;

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
