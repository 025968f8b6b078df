//! Schema-guided coercions: what a validator would refuse but is plainly meant.

use serde_json::{Map, Value};

use super::{scalar, types};

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
