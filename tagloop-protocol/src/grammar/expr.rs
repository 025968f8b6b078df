//! The grammar as data: rules of expressions, and their GBNF text.
//!
//! One tree serves three purposes: it is rendered to the GBNF text servers take
//! ([`Grammar::to_gbnf`]), it is what [`parse_gbnf`](super::parse_gbnf) reads that text back
//! into (so the text sent can be checked against the tree it came from), and the tests sample
//! strings from it.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::paths::KnownPaths;

/// One item of a character class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ClassItem {
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
pub(crate) enum Expr {
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
    #[cfg(test)]
    pub fn class_matches(&self, c: char) -> bool {
        match self {
            Expr::Class { negated, items } => items.iter().any(|i| i.contains(c)) != *negated,
            _ => false,
        }
    }

    /// How many bytes of GBNF text the expression is (as the body of a rule).
    pub fn gbnf_len(&self) -> usize {
        let mut out = String::new();
        self.write(&mut out, false);
        out.len()
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

/// A part of a JSON Schema the grammar does not follow: it would have made the grammar too
/// large, so the grammar accepts any JSON value there instead. Validation after the turn still
/// applies the whole schema; only the sampling is looser.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Simplified {
    /// Which schema: `the output schema`, or `the parameters of tool `name``.
    pub schema: String,
    /// A JSON Pointer into that schema to the first part that was simplified (cut to a few
    /// hundred bytes: keys come from the schema and may be long).
    pub pointer: String,
    /// How many parts of the schema were simplified.
    pub parts: usize,
}

impl std::fmt::Display for Simplified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.pointer.is_empty() {
            "the whole schema"
        } else {
            &self.pointer
        };
        write!(
            f,
            "{}: too large for a grammar, so {} part(s) of it accept any JSON value (the first at `{at}`)",
            self.schema, self.parts
        )
    }
}

/// A grammar: named rules, `root` first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grammar {
    rules: Vec<(String, Expr)>,
    /// Where each name is in `rules`: lookups stay constant-time in grammars of thousands of
    /// rules (a schema's sub-schemas each get one).
    index: HashMap<String, usize>,
    simplified: Vec<Simplified>,
    /// What path-valued parameters may name while the grammar is built (empty: free strings).
    known_paths: KnownPaths,
}

impl Grammar {
    /// An empty grammar.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// An empty grammar whose path-valued parameters will name one of `paths`.
    pub(crate) fn knowing(paths: &KnownPaths) -> Self {
        Grammar {
            known_paths: paths.clone(),
            ..Self::default()
        }
    }

    /// The paths path-valued parameters may name.
    pub(crate) fn known_paths(&self) -> &KnownPaths {
        &self.known_paths
    }

    /// Add a rule (a name already defined is replaced, in place).
    pub(crate) fn define(&mut self, name: impl Into<String>, expr: Expr) {
        let name = name.into();
        match self.index.get(&name) {
            Some(&i) => self.rules[i].1 = expr,
            None => {
                self.index.insert(name.clone(), self.rules.len());
                self.rules.push((name, expr));
            }
        }
    }

    /// Whether a rule of that name exists.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// The rule of that name.
    #[cfg(test)]
    pub(crate) fn get(&self, name: &str) -> Option<&Expr> {
        self.index.get(name).map(|&i| &self.rules[i].1)
    }

    /// The rules in definition order.
    pub(crate) fn rules(&self) -> &[(String, Expr)] {
        &self.rules
    }

    /// How many rules the grammar has: a measure of its size (the text's length is another),
    /// which a schema's size budget keeps in the low thousands.
    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }

    /// Forget every rule defined after the first `len`: how a part of a schema that turned out
    /// too large is taken back. The caller must hold no reference to the rules forgotten.
    pub(super) fn truncate(&mut self, len: usize) {
        for (name, _) in self.rules.drain(len.min(self.rules.len())..) {
            self.index.remove(&name);
        }
    }

    /// The parts of schemas this grammar accepts any JSON value for, because following them
    /// would have made it too large (empty for every schema of a realistic size). The caller
    /// should say so: the model is less constrained than the schema asks.
    pub fn simplified(&self) -> &[Simplified] {
        &self.simplified
    }

    /// Record a simplified schema (see [`Grammar::simplified`]).
    pub(super) fn note_simplified(&mut self, note: Simplified) {
        self.simplified.push(note);
    }

    /// A rule name built from `base` (sanitised to GBNF's `[a-z0-9-]`) not used yet.
    pub(crate) fn fresh_name(&self, base: &str) -> String {
        let clean = sanitize(base);
        if !self.has(&clean) {
            return clean;
        }
        (2..)
            .map(|i| format!("{clean}-{i}"))
            .find(|n| !self.has(n))
            .unwrap_or(clean)
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

/// `base` as a rule name: lowercase ASCII letters and digits, runs of anything else one `-`,
/// none at either end (`r` when nothing is left).
pub(super) fn sanitize(base: &str) -> String {
    let mut clean = String::with_capacity(base.len());
    for c in base.chars() {
        if c.is_ascii_alphanumeric() {
            clean.push(c.to_ascii_lowercase());
        } else if !clean.is_empty() && !clean.ends_with('-') {
            clean.push('-');
        }
    }
    while clean.ends_with('-') {
        clean.pop();
    }
    if clean.is_empty() {
        clean.push('r');
    }
    clean
}
