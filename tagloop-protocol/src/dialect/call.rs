//! A call read from another dialect, and its rendering in tagloop's own syntax.

use serde_json::{Map, Value};

/// A call read from a dialect: the tool and its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct DialectCall {
    /// The tool's name.
    pub tool: String,
    /// The arguments by name (dialects give no positions); [`render`](Self::render) writes them as
    /// one object when a name is not an identifier.
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

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && c.all(|c| c.is_alphanumeric() || c == '_')
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
        let parsed = crate::parse_action(&text).unwrap();
        assert_eq!(parsed.tool, "write_file");
        let back: Map<String, Value> = parsed
            .args
            .into_iter()
            .map(|a| (a.name.unwrap(), a.value))
            .collect();
        assert_eq!(back, call.args);
    }
}
