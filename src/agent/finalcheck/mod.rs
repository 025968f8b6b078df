//! Checking a final answer against the role (docs/protocol.md §1.5).

use serde_json::Value;

use super::role::Role;
use super::schema_fit;

/// How many schema errors one refusal lists.
const MAX_LISTED_ERRORS: usize = 10;

/// The verdict on a final answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// The answer is accepted as this value (a JSON string for free-text roles).
    Accepted {
        /// The value.
        value: Value,
        /// Leniencies used to read it.
        warnings: Vec<String>,
    },
    /// The answer is refused; the reason is written for the model.
    Refused(String),
}

/// Check a final answer's text (already trimmed and CDATA-unwrapped by the turn reader).
pub(crate) fn check(text: &str, role: &Role) -> Verdict {
    let text = text.trim();
    if text.is_empty() {
        return Verdict::Refused(
            "Your final answer was empty. Write the whole answer inside <final_answer>…</final_answer>.".into(),
        );
    }
    let Some(validator) = role.validator() else {
        return Verdict::Accepted {
            value: Value::String(text.to_string()),
            warnings: vec![],
        };
    };
    let mut warnings = Vec::new();
    let body = strip_fence(text);
    if body.len() != text.len() {
        warnings.push("markdown fence around the JSON final answer removed".to_string());
    }
    let body = crate::protocol::unwrap_cdata(body).trim();
    let value = match serde_json::from_str::<Value>(body) {
        Ok(v) => v,
        Err(strict) => match serde_json::from_str::<Value>(&loosen_json(body)) {
            Ok(v) => {
                warnings.push(
                    "the final answer was not strict JSON (single quotes, trailing commas or Python literals); it was read leniently"
                        .to_string(),
                );
                v
            }
            Err(_) => match role
                .output_schema()
                .and_then(|schema| schema_fit::xml_answer(body, schema))
            {
                Some(v) => {
                    warnings.push(
                        "the final answer was XML; its elements were read into the schema's JSON"
                            .to_string(),
                    );
                    v
                }
                None => {
                    return Verdict::Refused(format!(
                        "Your final answer is not valid JSON: {strict}. Write only the JSON value inside <final_answer>, with nothing before or after it."
                    ));
                }
            },
        },
    };
    let mut errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| {
            let path = e.instance_path().to_string();
            let path = if path.is_empty() {
                "(root)".to_string()
            } else {
                path
            };
            format!("{path}: {e}")
        })
        .collect();
    if errors.is_empty() {
        return Verdict::Accepted { value, warnings };
    }
    // What the validator refuses may be plainly meant: "3" for 3, "true" for true, one value
    // for a list of one. Coerced by the schema, and accepted only if that validates.
    if let Some(schema) = role.output_schema() {
        let mut notes = Vec::new();
        let coerced = schema_fit::coerce(value.clone(), schema, "", &mut notes);
        if !notes.is_empty() && validator.is_valid(&coerced) {
            warnings.extend(
                notes
                    .into_iter()
                    .map(|n| format!("coerced to the schema: {n}")),
            );
            return Verdict::Accepted {
                value: coerced,
                warnings,
            };
        }
    }
    errors.sort();
    errors.dedup();
    let total = errors.len();
    let mut msg = String::from("Your final answer does not match the required JSON Schema:\n");
    for e in errors.iter().take(MAX_LISTED_ERRORS) {
        msg.push_str("- ");
        msg.push_str(&crate::text::clip_chars(e, 300));
        msg.push('\n');
    }
    if total > MAX_LISTED_ERRORS {
        msg.push_str(&format!("- … and {} more\n", total - MAX_LISTED_ERRORS));
    }
    msg.push_str("Fix these and give the final answer again.");
    Verdict::Refused(msg)
}

/// Remove one surrounding markdown code fence (```` ``` ```` or ```` ```json ````).
fn strip_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let Some(body) = rest.trim_end().strip_suffix("```") else {
        return text;
    };
    // Drop the info string (`json`) on the opening line.
    match body.find('\n') {
        Some(nl) if body[..nl].trim().chars().all(|c| c.is_ascii_alphanumeric()) => {
            body[nl + 1..].trim()
        }
        _ => body.trim(),
    }
}

/// Rewrite almost-JSON into JSON: single-quoted strings become double-quoted, trailing commas
/// before `]` or `}` are dropped, and Python's `True`, `False`, `None` become JSON literals.
fn loosen_json(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' => {
                out.push('"');
                i += 1;
                while i < chars.len() && chars[i] != c {
                    match chars[i] {
                        '\\' if i + 1 < chars.len() => {
                            if chars[i + 1] == '\'' {
                                out.push('\'');
                            } else {
                                out.push('\\');
                                out.push(chars[i + 1]);
                            }
                            i += 2;
                            continue;
                        }
                        '"' => out.push_str("\\\""),
                        ch => out.push(ch),
                    }
                    i += 1;
                }
                out.push('"');
                i += 1;
            }
            ',' => {
                let mut j = i + 1;
                while j < chars.len() && chars[j].is_whitespace() {
                    j += 1;
                }
                if j < chars.len() && (chars[j] == ']' || chars[j] == '}') {
                    i += 1;
                } else {
                    out.push(c);
                    i += 1;
                }
            }
            c if c.is_alphabetic() => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                out.push_str(match word.as_str() {
                    "True" => "true",
                    "False" => "false",
                    "None" => "null",
                    w => w,
                });
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
