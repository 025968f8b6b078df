//! The JSON dialects: Hermes' `<tool_call>{…}</tool_call>` and JSON inside `<action>`.

use serde_json::{Map, Value};

use super::DialectCall;

/// `{"name": …, "arguments": {…}}` and its variants; `None` when the text is not a JSON object
/// at all.
pub(super) fn json_call(
    text: &str,
    names: &[&str],
    args: &[&str],
) -> Option<Result<DialectCall, String>> {
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
