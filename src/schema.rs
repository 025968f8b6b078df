//! JSON Schemas from outside (a `tagloop serve` request's tools and `response_format`, a role's
//! output schema, an eval suite's `json_schema` check), compiled within bounds.
//!
//! A schema's `pattern`s are regular expressions, and compiling one is where a small schema can
//! cost a lot: `(?=x)\w{100}yN` is 16 bytes of JSON, and 400 of them took 2.3 GB and 12 s with the
//! validator's defaults (a backtracking engine, each expression compiled up to the regex crate's
//! 10 MiB default). Here every schema is compiled
//!
//! * with the linear-time engine (the `regex` crate: no lookaround, no backreference — a pattern
//!   that needs one is refused with a message that says so), and matching is linear in the text;
//! * each expression within [`PATTERN_SIZE_LIMIT`] bytes of compiled program and
//!   [`PATTERN_DFA_LIMIT`] bytes of lazy-DFA cache;
//! * with at most [`MAX_PATTERNS`] expressions (`pattern`s and `patternProperties` keys) per
//!   schema, or per request where a request holds several ([`count_patterns`]);
//! * with at most [`MAX_SCHEMA_NODES`] subschemas (JSON objects) per schema, or per request
//!   ([`count_nodes`]), counted before anything is compiled: each compiled subschema costs the
//!   validator about 2 KiB, and 97,000 of them (128 tools of 760 properties, 2.7 MB: under the
//!   body limit) took +176 MiB for one request (issue 44 item 2).

use jsonschema::error::ValidationErrorKind;
use jsonschema::{PatternOptions, ValidationError, Validator};
use serde_json::Value;

/// Most regular expressions (`pattern` values and `patternProperties` keys) compiled for one
/// schema, or one `tagloop serve` request.
pub const MAX_PATTERNS: usize = 32;
/// Largest compiled program of one pattern, in bytes (the regex crate's `size_limit`).
pub const PATTERN_SIZE_LIMIT: usize = 1024 * 1024;
/// Largest lazy-DFA cache of one pattern, in bytes (the regex crate's `dfa_size_limit`).
pub const PATTERN_DFA_LIMIT: usize = 256 * 1024;

/// Most subschemas (JSON objects, wherever they sit) compiled for one schema, or one
/// `tagloop serve` request: about 40 MiB of validators at most.
pub const MAX_SCHEMA_NODES: usize = 20_000;

/// Why a schema was not compiled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The schema (or request) holds more regular expressions than are compiled.
    #[error(
        "the schema holds {found} regular expressions (`pattern`, `patternProperties`); at most {limit} are compiled"
    )]
    TooManyPatterns {
        /// How many it holds.
        found: usize,
        /// [`MAX_PATTERNS`].
        limit: usize,
    },
    /// The schema (or request) holds more subschemas than are compiled.
    #[error("the schema holds {found} subschemas (JSON objects); at most {limit} are compiled")]
    TooManyNodes {
        /// How many it holds.
        found: usize,
        /// [`MAX_SCHEMA_NODES`].
        limit: usize,
    },
    /// A pattern needs what the linear-time engine has not (lookaround, a backreference) or
    /// compiles past [`PATTERN_SIZE_LIMIT`].
    #[error(
        "the pattern at {at} is not supported: patterns are compiled by a linear-time engine (no lookaround, no backreference), each within {} KiB",
        PATTERN_SIZE_LIMIT / 1024
    )]
    Pattern {
        /// Where in the schema (a JSON pointer).
        at: String,
    },
    /// Not a valid JSON Schema: the validator's message.
    #[error("{0}")]
    Invalid(String),
}

/// How many regular expressions `schema` holds: every string under a `pattern` key and every
/// key of a `patternProperties` object, wherever they sit (a `const` or `default` that spells
/// one is counted too: the count errs on the safe side).
pub fn count_patterns(schema: &Value) -> usize {
    // An explicit stack: a deeply nested schema must not exhaust the thread's stack.
    let mut stack = vec![schema];
    let mut found = 0usize;
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    match (key.as_str(), child) {
                        ("pattern", Value::String(_)) => found += 1,
                        ("patternProperties", Value::Object(props)) => found += props.len(),
                        _ => {}
                    }
                    stack.push(child);
                }
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    found
}

/// How many JSON objects `schema` holds, itself included: its subschemas, counted on the safe
/// side (an object under `const`, `default` or `enum` is counted too).
pub fn count_nodes(schema: &Value) -> usize {
    let mut stack = vec![schema];
    let mut found = 0usize;
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                found += 1;
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    found
}

/// Compile `schema` within the bounds of this module (draft detected from `$schema`, as
/// `jsonschema::validator_for` does). Fails with [`SchemaError::TooManyPatterns`] before
/// compiling anything when it holds more than [`MAX_PATTERNS`] expressions, and with
/// [`SchemaError::TooManyNodes`] when it holds more than [`MAX_SCHEMA_NODES`] subschemas.
pub fn compile(schema: &Value) -> Result<Validator, SchemaError> {
    let found = count_nodes(schema);
    if found > MAX_SCHEMA_NODES {
        return Err(SchemaError::TooManyNodes {
            found,
            limit: MAX_SCHEMA_NODES,
        });
    }
    let found = count_patterns(schema);
    if found > MAX_PATTERNS {
        return Err(SchemaError::TooManyPatterns {
            found,
            limit: MAX_PATTERNS,
        });
    }
    jsonschema::options()
        .with_pattern_options(
            PatternOptions::regex()
                .size_limit(PATTERN_SIZE_LIMIT)
                .dfa_size_limit(PATTERN_DFA_LIMIT),
        )
        .build(schema)
        .map_err(|e| refusal(&e))
}

fn refusal(e: &ValidationError<'_>) -> SchemaError {
    match e.kind() {
        ValidationErrorKind::Format { format } if format == "regex" => SchemaError::Pattern {
            at: e.schema_path().to_string(),
        },
        _ => SchemaError::Invalid(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_patterns_and_pattern_properties_at_any_depth() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "string", "pattern": "^a$"},
            "pattern": {"type": "string"},
            "b": {"type": "array", "items": {"patternProperties": {"^x": {}, "^y": {"pattern": "z"}}}}
        }});
        assert_eq!(count_patterns(&schema), 4);
    }

    #[test]
    fn too_many_subschemas_are_refused_before_compiling() {
        let props: serde_json::Map<String, Value> = (0..MAX_SCHEMA_NODES)
            .map(|i| (format!("p{i}"), json!({"type": "string"})))
            .collect();
        let schema = json!({"type": "object", "properties": props});
        assert_eq!(count_nodes(&schema), MAX_SCHEMA_NODES + 2);
        let e = compile(&schema).unwrap_err();
        assert!(
            matches!(e, SchemaError::TooManyNodes { found, .. } if found == MAX_SCHEMA_NODES + 2),
            "{e}"
        );
    }

    #[test]
    fn ordinary_patterns_compile_and_validate() {
        let v = compile(&json!({"type": "string", "pattern": "^[a-z]{2,8}-\\d+$"})).unwrap();
        assert!(v.is_valid(&json!("abc-12")));
        assert!(!v.is_valid(&json!("ABC-12")));
    }

    #[test]
    fn lookaround_is_refused_with_where_and_why() {
        let e = compile(&json!({"properties": {"a": {"pattern": "(?=x)\\w"}}})).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, SchemaError::Pattern { .. }), "{text}");
        assert!(text.contains("/properties/a/pattern"), "{text}");
        assert!(text.contains("lookaround"), "{text}");
    }

    #[test]
    fn an_expression_past_the_size_limit_is_refused() {
        // A hundred thousand states: megabytes of program with the engine's defaults.
        let e = compile(&json!({"pattern": "[a-z]{100000}"})).unwrap_err();
        assert!(matches!(e, SchemaError::Pattern { .. }), "{e}");
    }

    #[test]
    fn too_many_patterns_are_refused_before_compiling() {
        let props: serde_json::Map<String, Value> = (0..=MAX_PATTERNS)
            .map(|i| (format!("p{i}"), json!({"pattern": format!("^{i}$")})))
            .collect();
        let e = compile(&json!({"properties": props})).unwrap_err();
        assert!(
            matches!(e, SchemaError::TooManyPatterns { found, .. } if found == MAX_PATTERNS + 1),
            "{e}"
        );
    }
}
