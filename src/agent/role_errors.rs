//! Parse errors of role files told without their text: a role file may sit next to secrets (a
//! mistyped path can name `.env`), and parsers quote the offending line or value. Only the
//! parser's reason, with quoted strings blanked, and the place are kept.

/// A TOML error as a reason and a place. The error's `Display` quotes the offending line of the
/// file, so only its message and span are used.
pub(super) fn toml_detail(e: &toml::de::Error, text: &str) -> String {
    let reason = without_quoted_text(e.message());
    match e.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
            format!("TOML: {reason} at line {line}, column {column}")
        }
        None => format!("TOML: {reason}"),
    }
}

/// A JSON error as a reason and a place (serde's messages can quote a string of the file).
pub(super) fn json_detail(e: &serde_json::Error) -> String {
    let message = e.to_string();
    let place = format!(" at line {} column {}", e.line(), e.column());
    let reason = without_quoted_text(message.strip_suffix(&place).unwrap_or(&message));
    format!("JSON: {reason} at line {}, column {}", e.line(), e.column())
}

/// `message` on one line, with every double-quoted string in it (serde quotes the values it
/// could not use: `invalid type: string "…"`) replaced by `"…"`. Names in backticks (fields,
/// expected tokens) are kept.
fn without_quoted_text(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut chars = message.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push_str("\"…\"");
                let mut escaped = false;
                for q in chars.by_ref() {
                    match q {
                        '\\' if !escaped => escaped = true,
                        '"' if !escaped => break,
                        _ => escaped = false,
                    }
                }
            }
            '\n' => out.push_str("; "),
            c => out.push(c),
        }
    }
    out
}
