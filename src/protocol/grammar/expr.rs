//! The grammar as data: rules of expressions, and their GBNF text.
//!
//! One tree serves three purposes: it is rendered to the GBNF text servers take
//! ([`Grammar::to_gbnf`]), it is what [`parse_gbnf`](super::parse_gbnf) reads that text back
//! into (so the text sent can be checked against the tree it came from), and the tests sample
//! strings from it.

use std::collections::HashSet;
use std::fmt::Write as _;

/// One item of a character class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClassItem {
    /// One character.
    Char(char),
    /// An inclusive range of characters.
    Range(char, char),
}

impl ClassItem {
    /// Whether the item holds `c`.
    pub fn contains(self, c: char) -> bool {
        match self {
            ClassItem::Char(x) => x == c,
            ClassItem::Range(a, b) => (a..=b).contains(&c),
        }
    }
}

/// A grammar expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// A literal string (may be empty: matches nothing).
    Lit(String),
    /// One character in (or, when `negated`, not in) the items.
    Class {
        /// `[^…]`.
        negated: bool,
        /// The characters and ranges.
        items: Vec<ClassItem>,
    },
    /// Another rule, by name.
    Ref(String),
    /// Each in turn.
    Seq(Vec<Expr>),
    /// One of them (the first that fits is not preferred: any may match).
    Alt(Vec<Expr>),
    /// `min` to `max` (unbounded when `None`) repetitions.
    Repeat {
        /// What is repeated.
        expr: Box<Expr>,
        /// Fewest repetitions.
        min: u32,
        /// Most repetitions.
        max: Option<u32>,
    },
}

impl Expr {
    /// A literal.
    pub fn lit(s: impl Into<String>) -> Expr {
        Expr::Lit(s.into())
    }

    /// A reference to a rule.
    pub fn rule(name: impl Into<String>) -> Expr {
        Expr::Ref(name.into())
    }

    /// A sequence (flattened; one element is itself).
    pub fn seq(items: impl IntoIterator<Item = Expr>) -> Expr {
        let mut out = Vec::new();
        for e in items {
            match e {
                Expr::Seq(inner) => out.extend(inner),
                Expr::Lit(s) if s.is_empty() => {}
                e => out.push(e),
            }
        }
        if out.len() == 1 {
            out.pop().unwrap_or(Expr::Seq(Vec::new()))
        } else {
            Expr::Seq(out)
        }
    }

    /// A choice (one element is itself).
    pub fn alt(items: impl IntoIterator<Item = Expr>) -> Expr {
        let mut out: Vec<Expr> = Vec::new();
        for e in items {
            match e {
                Expr::Alt(inner) => out.extend(inner),
                e => out.push(e),
            }
        }
        if out.len() == 1 {
            out.pop().unwrap_or(Expr::Alt(Vec::new()))
        } else {
            Expr::Alt(out)
        }
    }

    /// `min..=max` repetitions.
    pub fn repeat(self, min: u32, max: Option<u32>) -> Expr {
        Expr::Repeat {
            expr: Box::new(self),
            min,
            max,
        }
    }

    /// Zero or one.
    pub fn opt(self) -> Expr {
        self.repeat(0, Some(1))
    }

    /// A class of the given characters and ranges.
    pub fn class(negated: bool, items: impl IntoIterator<Item = ClassItem>) -> Expr {
        Expr::Class {
            negated,
            items: items.into_iter().collect(),
        }
    }

    /// Whether a character class matches `c` (false for other expressions).
    pub fn class_matches(&self, c: char) -> bool {
        match self {
            Expr::Class { negated, items } => items.iter().any(|i| i.contains(c)) != *negated,
            _ => false,
        }
    }

    fn write(&self, out: &mut String, nested: bool) {
        match self {
            Expr::Lit(s) => write_literal(out, s),
            Expr::Class { negated, items } => {
                out.push('[');
                if *negated {
                    out.push('^');
                }
                for item in items {
                    match *item {
                        ClassItem::Char(c) => write_class_char(out, c),
                        ClassItem::Range(a, b) => {
                            write_class_char(out, a);
                            out.push('-');
                            write_class_char(out, b);
                        }
                    }
                }
                out.push(']');
            }
            Expr::Ref(name) => out.push_str(name),
            Expr::Seq(items) => {
                if items.is_empty() {
                    out.push_str("\"\"");
                    return;
                }
                if nested {
                    out.push('(');
                }
                for (i, e) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    e.write(out, true);
                }
                if nested {
                    out.push(')');
                }
            }
            Expr::Alt(items) => {
                if nested {
                    out.push('(');
                }
                for (i, e) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(" | ");
                    }
                    e.write(out, false);
                }
                if nested {
                    out.push(')');
                }
            }
            Expr::Repeat { expr, min, max } => {
                // A postfix operator binds to one primary: anything else is parenthesised.
                let primary = matches!(**expr, Expr::Lit(_) | Expr::Class { .. } | Expr::Ref(_));
                if primary {
                    expr.write(out, true);
                } else {
                    out.push('(');
                    expr.write(out, false);
                    out.push(')');
                }
                match (min, max) {
                    (0, Some(1)) => out.push('?'),
                    (0, None) => out.push('*'),
                    (1, None) => out.push('+'),
                    (m, None) => {
                        let _ = write!(out, "{{{m},}}");
                    }
                    (m, Some(n)) if m == n => {
                        let _ = write!(out, "{{{m}}}");
                    }
                    (m, Some(n)) => {
                        let _ = write!(out, "{{{m},{n}}}");
                    }
                }
            }
        }
    }
}

/// Characters written as escapes in literals and classes.
fn escape(c: char) -> Option<String> {
    Some(match c {
        '\n' => "\\n".into(),
        '\r' => "\\r".into(),
        '\t' => "\\t".into(),
        '\\' => "\\\\".into(),
        c if (c as u32) < 0x20 || c as u32 == 0x7f => format!("\\x{:02X}", c as u32),
        _ => return None,
    })
}

fn write_literal(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match escape(c) {
            Some(e) => out.push_str(&e),
            None if c == '"' => out.push_str("\\\""),
            None => out.push(c),
        }
    }
    out.push('"');
}

fn write_class_char(out: &mut String, c: char) {
    match escape(c) {
        Some(e) => out.push_str(&e),
        // llama.cpp knows `\[` and `\]` but no `\-` or `\^`.
        None if matches!(c, ']' | '[') => {
            out.push('\\');
            out.push(c);
        }
        None if matches!(c, '-' | '^') => {
            let _ = write!(out, "\\x{:02X}", c as u32);
        }
        None => out.push(c),
    }
}

/// A grammar: named rules, `root` first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grammar {
    rules: Vec<(String, Expr)>,
    names: HashSet<String>,
}

impl Grammar {
    /// An empty grammar.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a rule (a name already defined is replaced).
    pub fn define(&mut self, name: impl Into<String>, expr: Expr) {
        let name = name.into();
        if self.names.contains(&name) {
            if let Some(slot) = self.rules.iter_mut().find(|(n, _)| *n == name) {
                slot.1 = expr;
            }
        } else {
            self.names.insert(name.clone());
            self.rules.push((name, expr));
        }
    }

    /// Whether a rule of that name exists.
    pub fn has(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// The rule of that name.
    pub fn get(&self, name: &str) -> Option<&Expr> {
        self.rules.iter().find(|(n, _)| n == name).map(|(_, e)| e)
    }

    /// The rules in definition order.
    pub fn rules(&self) -> &[(String, Expr)] {
        &self.rules
    }

    /// A rule name built from `base` (sanitised to GBNF's `[a-z0-9-]`) not used yet.
    pub fn fresh_name(&self, base: &str) -> String {
        let mut clean: String = base
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        while clean.contains("--") {
            clean = clean.replace("--", "-");
        }
        let clean = clean.trim_matches('-');
        let clean = if clean.is_empty() { "r" } else { clean };
        if !self.has(clean) {
            return clean.to_owned();
        }
        (2..)
            .map(|i| format!("{clean}-{i}"))
            .find(|n| !self.has(n))
            .unwrap_or_else(|| clean.to_owned())
    }

    /// The GBNF text: one rule per line, `root` first.
    pub fn to_gbnf(&self) -> String {
        let mut out = String::new();
        let root = self.rules.iter().filter(|(n, _)| n == "root");
        let rest = self.rules.iter().filter(|(n, _)| n != "root");
        for (name, expr) in root.chain(rest) {
            out.push_str(name);
            out.push_str(" ::= ");
            expr.write(&mut out, false);
            out.push('\n');
        }
        out
    }
}
