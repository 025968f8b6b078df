//! Binding a call's arguments to a tool's parameters (docs/protocol.md §1.3).
//!
//! Positional arguments bind in declared order (the order of `properties`), named ones by name.
//! A lone object argument is spread into named arguments unless the tool takes exactly one
//! parameter and that parameter is an object. `null` given for an optional parameter that does not
//! allow `null` counts as "not given" (models write `end_line=None`).
//! Coercions: `"3"` → 3 for integer/number parameters, `"true"`/`"false"` → bool, a number → its text
//! for string parameters; a number with no fraction (`3.0`) is accepted as an integer.

use serde_json::{Map, Value};

use super::action::Arg;

/// Why arguments did not bind; the message is written for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BindError {
    /// An argument name the tool does not have.
    #[error("unknown argument `{name}`{}; its parameters are: {}", for_tool(.tool), list(.params))]
    Unknown {
        /// The tool name, when known.
        tool: Option<String>,
        /// The argument name as written (or a key of a spread object argument); never a
        /// positional argument, which takes the name of the parameter at its position.
        name: String,
        /// The tool's parameters, in order.
        params: Vec<String>,
    },
    /// The same parameter given twice (by name twice, or by position and by name).
    #[error("argument `{name}` is given more than once{}", for_tool(.tool))]
    Duplicate {
        /// The tool name, when known.
        tool: Option<String>,
        /// The parameter's declared name (a positional argument counts as the parameter at its
        /// position).
        name: String,
    },
    /// Required parameters not given.
    #[error("missing required argument{} {}{}", if .names.len() == 1 { "" } else { "s" }, quoted(.names), for_tool(.tool))]
    Missing {
        /// The tool name, when known.
        tool: Option<String>,
        /// The required parameters not given, in the order of the schema's `required`; never empty.
        names: Vec<String>,
    },
    /// A value that cannot be coerced to the parameter's declared type.
    #[error("argument `{name}`{} must be {expected}, not {found}", for_tool(.tool))]
    TypeMismatch {
        /// The tool name, when known.
        tool: Option<String>,
        /// The parameter's declared name (for a positional argument too).
        name: String,
        /// The declared type(s), in words.
        expected: String,
        /// What was given, in words.
        found: String,
    },
    /// More positional arguments than the tool has parameters.
    #[error("{given} positional arguments given{}, but it takes {}: {}", for_tool(.tool), .params.len(), list(.params))]
    TooManyPositional {
        /// The tool name, when known.
        tool: Option<String>,
        /// How many positional arguments were given.
        given: usize,
        /// The tool's parameters, in order.
        params: Vec<String>,
    },
}

fn for_tool(tool: &Option<String>) -> String {
    tool.as_ref()
        .map(|t| format!(" for {t}"))
        .unwrap_or_default()
}

fn list(params: &[String]) -> String {
    if params.is_empty() {
        "none".to_string()
    } else {
        params.join(", ")
    }
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Bind arguments to a parameter schema (a JSON Schema object with `properties` and `required`).
///
/// The tool name in messages is taken from the schema's `title`, if any; see [`bind_tool`].
///
/// ```
/// use serde_json::json;
/// use tagloop_protocol::{bind, parse_action};
///
/// let schema = json!({"type": "object",
///     "properties": {"path": {"type": "string"}, "start_line": {"type": "integer"}},
///     "required": ["path"]});
/// let call = parse_action(r#"read_file("a.txt", start_line="3")"#).unwrap();
/// let args = bind(&call.args, &schema).unwrap();
/// assert_eq!(serde_json::Value::Object(args), json!({"path": "a.txt", "start_line": 3}));
/// ```
pub fn bind(args: &[Arg], schema: &Value) -> Result<Map<String, Value>, BindError> {
    let title = schema.get("title").and_then(Value::as_str);
    bind_inner(title, args, schema)
}

/// [`bind`], naming the tool in error messages.
///
/// ```
/// use serde_json::json;
/// use tagloop_protocol::{bind_tool, parse_action};
///
/// let schema = json!({"properties": {"path": {}, "start_line": {}, "end_line": {}}});
/// let call = parse_action(r#"read_file(pth="a")"#).unwrap();
/// let err = bind_tool("read_file", &call.args, &schema).unwrap_err();
/// assert_eq!(err.to_string(),
///     "unknown argument `pth` for read_file; its parameters are: path, start_line, end_line");
/// ```
pub fn bind_tool(
    tool: &str,
    args: &[Arg],
    schema: &Value,
) -> Result<Map<String, Value>, BindError> {
    bind_inner(Some(tool), args, schema)
}

fn bind_inner(
    tool: Option<&str>,
    args: &[Arg],
    schema: &Value,
) -> Result<Map<String, Value>, BindError> {
    let tool = tool.map(str::to_string);
    let empty = Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let params: Vec<String> = props.keys().cloned().collect();
    let required: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();

    // A lone object argument is spread, unless the tool takes exactly one object parameter.
    let spread: Vec<Arg>;
    let args = match args {
        [
            Arg {
                name: None,
                value: Value::Object(map),
            },
        ] if !(params.len() == 1 && allows(props.get(&params[0]), "object")) => {
            spread = map
                .iter()
                .map(|(k, v)| Arg {
                    name: Some(k.clone()),
                    value: v.clone(),
                })
                .collect();
            &spread[..]
        }
        _ => args,
    };

    let mut out = Map::new();
    let mut positional = 0;
    for arg in args {
        let name = match &arg.name {
            Some(n) => n.clone(),
            None => {
                positional += 1;
                match params.get(positional - 1) {
                    Some(p) => p.clone(),
                    None => {
                        let given = args.iter().filter(|a| a.name.is_none()).count();
                        return Err(BindError::TooManyPositional {
                            tool,
                            given,
                            params,
                        });
                    }
                }
            }
        };
        let Some(prop) = props.get(&name) else {
            return Err(BindError::Unknown { tool, name, params });
        };
        if out.contains_key(&name) {
            return Err(BindError::Duplicate { tool, name });
        }
        if arg.value.is_null() && !required.contains(&name) && !allows(Some(prop), "null") {
            continue;
        }
        let v = coerce(&arg.value, prop).map_err(|(expected, found)| BindError::TypeMismatch {
            tool: tool.clone(),
            name: name.clone(),
            expected,
            found,
        })?;
        out.insert(name, v);
    }
    let missing: Vec<String> = required
        .iter()
        .filter(|r| !out.contains_key(*r))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Err(BindError::Missing {
            tool,
            names: missing,
        });
    }
    Ok(out)
}

/// The declared JSON types of a property (empty: anything goes).
fn types(prop: Option<&Value>) -> Vec<&str> {
    match prop.and_then(|p| p.get("type")) {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn allows(prop: Option<&Value>, ty: &str) -> bool {
    let ts = types(prop);
    ts.is_empty() || ts.contains(&ty) || (ty == "integer" && ts.contains(&"number"))
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => {
            let short: String = s.chars().take(40).collect();
            let more = if short.len() < s.len() { "…" } else { "" };
            format!("the string {:?}", format!("{short}{more}"))
        }
        Value::Array(_) => "a list".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}

fn type_words(ts: &[&str]) -> String {
    let words: Vec<&str> = ts
        .iter()
        .map(|t| match *t {
            "string" => "a string",
            "integer" => "an integer",
            "number" => "a number",
            "boolean" => "true or false",
            "array" => "a list",
            "object" => "an object",
            "null" => "null",
            other => other,
        })
        .collect();
    match words.as_slice() {
        [] => "a value".to_string(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} or {}", init.join(", "), last),
    }
}

/// Check `v` against the property's declared type, applying the allowed coercions.
fn coerce(v: &Value, prop: &Value) -> Result<Value, (String, String)> {
    let ts = types(Some(prop));
    if ts.is_empty() {
        return Ok(v.clone());
    }
    let fits = |t: &str| match (t, v) {
        ("string", Value::String(_))
        | ("boolean", Value::Bool(_))
        | ("array", Value::Array(_))
        | ("object", Value::Object(_))
        | ("null", Value::Null)
        | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => n.is_i64() || n.is_u64(),
        _ => false,
    };
    if ts.iter().any(|t| fits(t)) {
        return Ok(v.clone());
    }
    for t in &ts {
        let c = match (*t, v) {
            ("integer", Value::Number(n)) => n
                .as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                .map(|f| Value::from(f as i64)),
            ("integer", Value::String(s)) => s.trim().parse::<i64>().ok().map(Value::from),
            ("number", Value::String(s)) => {
                let s = s.trim();
                s.parse::<i64>().ok().map(Value::from).or_else(|| {
                    s.parse::<f64>()
                        .ok()
                        .and_then(serde_json::Number::from_f64)
                        .map(Value::Number)
                })
            }
            ("boolean", Value::String(s)) => match s.trim() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            ("string", Value::Number(n)) => Some(Value::String(n.to_string())),
            _ => None,
        };
        if let Some(c) = c {
            return Ok(c);
        }
    }
    Err((type_words(&ts), describe(v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn a(name: Option<&str>, value: Value) -> Arg {
        Arg {
            name: name.map(str::to_string),
            value,
        }
    }

    fn schema() -> Value {
        json!({"type": "object", "title": "read_file",
            "properties": {"path": {"type": "string"}, "start_line": {"type": "integer"}, "end_line": {"type": "integer"}},
            "required": ["path"]})
    }

    #[test]
    fn positional_and_named() {
        let m = bind(
            &[a(None, json!("x")), a(Some("end_line"), json!("7"))],
            &schema(),
        )
        .unwrap();
        assert_eq!(Value::Object(m), json!({"path": "x", "end_line": 7}));
    }

    #[test]
    fn errors_read_well() {
        let e = bind(&[a(Some("pth"), json!("x"))], &schema()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown argument `pth` for read_file; its parameters are: path, start_line, end_line"
        );
        let e = bind(
            &[a(None, json!("x")), a(Some("path"), json!("y"))],
            &schema(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "argument `path` is given more than once for read_file"
        );
        let e = bind(&[a(Some("start_line"), json!(1))], &schema()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "missing required argument `path` for read_file"
        );
        let e = bind(&[a(None, json!("x")), a(None, json!("abc"))], &schema()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "argument `start_line` for read_file must be an integer, not the string \"abc\""
        );
        let e = bind(
            &[
                a(None, json!("x")),
                a(None, json!(1)),
                a(None, json!(2)),
                a(None, json!(3)),
            ],
            &schema(),
        )
        .unwrap_err();
        assert!(matches!(e, BindError::TooManyPositional { given: 4, .. }));
    }

    #[test]
    fn coercions() {
        let s = json!({"properties": {"n": {"type": "number"}, "b": {"type": "boolean"}, "s": {"type": "string"}, "i": {"type": "integer"}}});
        let m = bind(
            &[
                a(Some("n"), json!("2.5")),
                a(Some("b"), json!("true")),
                a(Some("s"), json!(42)),
                a(Some("i"), json!(3.0)),
            ],
            &s,
        )
        .unwrap();
        assert_eq!(
            Value::Object(m),
            json!({"n": 2.5, "b": true, "s": "42", "i": 3})
        );
        assert!(bind(&[a(Some("b"), json!(1))], &s).is_err());
    }

    #[test]
    fn spread_lone_object() {
        let m = bind(&[a(None, json!({"path": "a", "start_line": 2}))], &schema()).unwrap();
        assert_eq!(Value::Object(m), json!({"path": "a", "start_line": 2}));
        let single = json!({"properties": {"data": {"type": "object"}}});
        let m = bind(&[a(None, json!({"k": 1}))], &single).unwrap();
        assert_eq!(Value::Object(m), json!({"data": {"k": 1}}));
    }

    #[test]
    fn null_for_optional_is_absent() {
        let m = bind(
            &[a(None, json!("x")), a(Some("end_line"), Value::Null)],
            &schema(),
        )
        .unwrap();
        assert_eq!(Value::Object(m), json!({"path": "x"}));
    }
}
