//! The grammar in llguidance's Lark syntax: what llama.cpp hands to llguidance (instead of its
//! own GBNF sampler) when a grammar's text starts with `%llguidance`, on builds with
//! `-DLLAMA_LLGUIDANCE=ON`. llguidance computes a token mask in tens of microseconds where
//! llama.cpp's GBNF sampler takes milliseconds (docs/llguidance.md in llama.cpp).
//!
//! The rules are the same tree [`Grammar::to_gbnf`] writes, rule for rule, so a string one form
//! accepts the other does too (the tests check it with the `llguidance` crate on sampled turns).
//! Lark differs from GBNF in ways the renderer takes care of:
//!
//! * the start rule is `start` (it refers to our `root`);
//! * every name is lowercase, so every rule is a grammar rule (an uppercase name would be a
//!   lexeme, which may not be recursive); llguidance allows `-` in names, as GBNF does;
//! * there is no empty string literal: an empty sequence in a choice makes the choice optional
//!   (`(a | b)?`), and a rule that matches only the empty string is an optional reference to a
//!   rule that can never be entered;
//! * character classes are regular expressions (`/[^<]/`), every character outside
//!   `[A-Za-z0-9 ]` written as `\x{…}` so no text of ours can end the `/…/` early or change the
//!   class's meaning;
//! * literals are one lexeme per character (see `literal`), control characters as regular
//!   expressions.

use std::fmt::Write as _;

use super::expr::{ClassItem, Expr, Grammar};

/// The first line llama.cpp looks for to hand a grammar to llguidance.
pub(super) const LARK_HEADER: &str = "%llguidance {}";

impl Grammar {
    /// The grammar in llguidance's Lark syntax, starting with `%llguidance {}` (llama.cpp sends
    /// such a grammar to llguidance, and refuses it when built without it). Accepts the same
    /// strings as [`Grammar::to_gbnf`]; the grammar must have a `root` rule.
    pub fn to_lark(&self) -> String {
        let mut out = String::new();
        out.push_str(LARK_HEADER);
        out.push('\n');
        out.push_str("start: root\n");
        let root = self.rules().iter().filter(|(n, _)| n == "root");
        let rest = self.rules().iter().filter(|(n, _)| n != "root");
        let mut needs_never = false;
        for (name, expr) in root.chain(rest) {
            out.push_str(&lark_name(name));
            out.push_str(": ");
            match render(expr, false) {
                Some(body) => out.push_str(&body),
                None => {
                    // Only the empty string: an optional reference to a rule with no way in.
                    out.push_str("never?");
                    needs_never = true;
                }
            }
            out.push('\n');
        }
        if needs_never {
            // `never` would have to start with a character that is in no class at all.
            out.push_str("never: /[^\\x{0}-\\x{10FFFF}]/\n");
        }
        out
    }
}

/// A rule name as Lark reads it: lowercase, never starting with a digit.
fn lark_name(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    if lower.starts_with(|c: char| c.is_ascii_alphabetic()) {
        lower
    } else {
        format!("r-{lower}")
    }
}

/// The expression in Lark; `None` when it matches only the empty string.
fn render(e: &Expr, nested: bool) -> Option<String> {
    match e {
        Expr::Lit(s) if s.is_empty() => None,
        Expr::Lit(s) => Some(literal(s)),
        Expr::Class { negated, items } => Some(class(*negated, items)),
        Expr::Ref(name) => Some(lark_name(name)),
        Expr::Seq(items) => {
            let parts: Vec<String> = items.iter().filter_map(|x| render(x, true)).collect();
            match parts.len() {
                0 => None,
                1 => parts.into_iter().next(),
                _ if nested => Some(format!("({})", parts.join(" "))),
                _ => Some(parts.join(" ")),
            }
        }
        Expr::Alt(items) => {
            let parts: Vec<Option<String>> = items.iter().map(|x| render(x, false)).collect();
            let empty = parts.iter().any(Option::is_none);
            let parts: Vec<String> = parts.into_iter().flatten().collect();
            match (parts.len(), empty) {
                (0, _) => None,
                (_, true) => Some(format!("({})?", parts.join(" | "))),
                (1, false) => parts.into_iter().next(),
                (_, false) if nested => Some(format!("({})", parts.join(" | "))),
                (_, false) => Some(parts.join(" | ")),
            }
        }
        Expr::Repeat { expr, min, max } => {
            let inner = render(expr, true)?;
            // A postfix operator binds to one item: parenthesise anything longer.
            let inner = if inner.contains(' ') {
                format!("({inner})")
            } else {
                inner
            };
            let op = match (min, max) {
                (_, Some(0)) => return None,
                (0, Some(1)) => "?".to_owned(),
                (0, None) => "*".to_owned(),
                (1, None) => "+".to_owned(),
                (m, None) => format!("{{{m},}}"),
                (m, Some(n)) if m == n => format!("{{{m}}}"),
                (m, Some(n)) => format!("{{{m},{n}}}"),
            };
            Some(format!("{inner}{op}"))
        }
    }
}

/// A literal, one lexeme per character (`"<" "/" "a"`): llguidance's lexer is greedy, so a
/// multi-character lexeme that shares a prefix with a shorter one allowed at the same place
/// (`"</final_answer>"` against the answer text's `/[<]/`) would take the bytes and fail when
/// the text goes on (`</a`), where GBNF goes back. With one character per lexeme no lexeme is a
/// prefix of another. Control characters are written as regular expressions.
fn literal(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        match c {
            '"' => out.push_str("\"\\\"\""),
            '\\' => out.push_str("\"\\\\\""),
            c if c.is_control() => {
                out.push('/');
                regex_char(&mut out, c);
                out.push('/');
            }
            c => {
                out.push('"');
                out.push(c);
                out.push('"');
            }
        }
    }
    out
}

/// A character class as a one-character regular expression.
fn class(negated: bool, items: &[ClassItem]) -> String {
    if items.is_empty() {
        // `[^]` in GBNF (our `.`): any character. An empty positive class matches nothing.
        return if negated {
            "/(?s:.)/".to_owned()
        } else {
            "/[^\\x{0}-\\x{10FFFF}]/".to_owned()
        };
    }
    let mut out = String::from("/[");
    if negated {
        out.push('^');
    }
    for item in items {
        match *item {
            ClassItem::Char(c) => regex_char(&mut out, c),
            ClassItem::Range(a, b) => {
                regex_char(&mut out, a);
                out.push('-');
                regex_char(&mut out, b);
            }
        }
    }
    out.push_str("]/");
    out
}

/// One character in a regular expression: letters, digits and the space as themselves, every
/// other character as `\x{…}` (so `/`, `]`, `-`, `^` and `\` never act as syntax).
fn regex_char(out: &mut String, c: char) {
    if c.is_ascii_alphanumeric() || c == ' ' {
        out.push(c);
    } else {
        let _ = write!(out, "\\x{{{:X}}}", c as u32);
    }
}
