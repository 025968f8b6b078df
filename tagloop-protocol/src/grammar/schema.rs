//! JSON Schema as grammar, in a grammar whose size stays proportional to the schema and capped.
//!
//! Three rules keep a small schema from making a huge grammar (issue 21):
//!
//! * Every object and array, and every other sub-schema longer than a few dozen bytes of GBNF,
//!   is one named rule, written once and referred to by name. What a parent holds of a child is
//!   then a name or a short expression, so copying it (an array's item is written twice: the
//!   first one and the ones after a comma) costs a constant, never a copy of a whole subtree:
//!   22 nested arrays make 22 rules, not 2²² copies of the innermost one.
//! * Optional members are a chain of rules, linear in their number (`members.rs`),
//!   where spelling out "which one comes first" copied each member once per member before it.
//! * The rules of one schema, and of all the schemas of one grammar, have a budget in bytes of
//!   GBNF text (`budget.rs`: [`SCHEMA_BUDGET`], [`GRAMMAR_BUDGET`]). A sub-schema whose rules would exceed it
//!   is taken back and accepts any JSON value instead; the grammar records that it did
//!   ([`Grammar::simplified`](super::Grammar::simplified)) so the caller can say so. Validation after the turn still applies
//!   the whole schema.

use std::collections::HashSet;

use serde_json::Value;

use super::budget::{GRAMMAR_BUDGET, NAME_MAX, SCHEMA_BUDGET};
use super::expr::{Expr, Simplified, sanitize};
use super::members::Members;
use super::paths::PathKind;
use super::values::{Place, Values};

/// The deepest schema nesting followed; deeper parts accept any JSON value.
const MAX_SCHEMA_DEPTH: usize = 24;

/// Longest expression (in GBNF bytes) a sub-schema is written inline as; longer ones get a rule.
const INLINE_MAX: usize = 64;

/// Longest JSON Pointer kept in a [`Simplified`] note.
const POINTER_MAX: usize = 256;

/// A point to roll back to when a sub-schema turns out too large.
pub(super) struct Mark {
    rules: usize,
    used_total: usize,
    used_schema: usize,
    simplified: usize,
}

impl Values<'_> {
    /// Build the rules of one schema (the output schema, or one tool's parameters), labelled
    /// `label` in what the grammar records of it ([`Grammar::simplified`](super::Grammar::simplified)).
    pub(super) fn within<T>(&mut self, label: &str, build: impl FnOnce(&mut Self) -> T) -> T {
        let b = &mut self.budget;
        b.used_schema = 0;
        b.path.clear();
        b.first_simplified = None;
        b.simplified = 0;
        let out = build(self);
        let b = &mut self.budget;
        if b.simplified > 0 {
            let pointer = b.first_simplified.take().unwrap_or_default();
            self.g.note_simplified(Simplified {
                schema: label.to_owned(),
                pointer,
                parts: b.simplified,
            });
        }
        out
    }

    /// The values a JSON Schema accepts, as far as grammar can say it: `type`, `properties`,
    /// `required`, `items`, `minItems`/`maxItems`, `enum`, `const`, `anyOf`/`oneOf`, nested
    /// objects. Anything else (`$ref`, `pattern`, `allOf` of several, …) accepts any JSON value
    /// of the type given, and validation after the turn still applies. Rules it defines are
    /// named from `base`. What it returns is a rule reference or an expression of at most
    /// [`INLINE_MAX`] bytes, so a caller may copy it freely.
    pub(super) fn schema(
        &mut self,
        schema: &Value,
        place: Place,
        depth: usize,
        base: &str,
    ) -> Expr {
        let Some(obj) = schema.as_object() else {
            return self.any();
        };
        if depth > MAX_SCHEMA_DEPTH || obj.contains_key("$ref") {
            return self.any();
        }
        if !self.room(INLINE_MAX) {
            return self.simplify();
        }
        let mark = self.mark();
        let built = self
            .schema_expr(schema, obj, place, depth, base)
            .and_then(|e| {
                if e.gbnf_len() <= INLINE_MAX {
                    Some(e)
                } else {
                    let name = self.fresh(base);
                    self.define_charged(&name, e).then(|| Expr::rule(name))
                }
            });
        match built {
            Some(e) => e,
            None => {
                self.rollback(mark);
                self.simplify()
            }
        }
    }

    /// A schema's expression, with `None` when one of its own rules does not fit the budget.
    fn schema_expr(
        &mut self,
        schema: &Value,
        obj: &serde_json::Map<String, Value>,
        place: Place,
        depth: usize,
        base: &str,
    ) -> Option<Expr> {
        if let Some(c) = obj.get("const") {
            return Some(literal(c));
        }
        if let Some(Value::Array(options)) = obj.get("enum")
            && !options.is_empty()
        {
            return Some(Expr::alt(options.iter().map(literal).collect::<Vec<_>>()));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = obj.get(key)
                && !options.is_empty()
            {
                let mut alts = Vec::with_capacity(options.len());
                for (i, s) in options.iter().enumerate() {
                    self.budget.path.push(format!("{key}/{i}"));
                    alts.push(self.schema(s, place, depth + 1, &format!("{base}-{i}")));
                    self.budget.path.pop();
                }
                return Some(Expr::alt(alts));
            }
        }
        if let Some(Value::Array(all)) = obj.get("allOf")
            && let [only] = all.as_slice()
        {
            self.budget.path.push("allOf/0".into());
            let e = self.schema(only, place, depth + 1, base);
            self.budget.path.pop();
            return Some(e);
        }
        match obj.get("type") {
            Some(Value::String(t)) => self.typed(t, schema, place, depth, base),
            Some(Value::Array(types)) if !types.is_empty() => {
                // Each type once: `["object", "object"]` must not build the members twice.
                let mut seen = HashSet::new();
                let names: Vec<&str> = types
                    .iter()
                    .filter_map(Value::as_str)
                    .filter(|t| seen.insert(*t))
                    .collect();
                if names.is_empty() {
                    return Some(self.any());
                }
                let mut alts = Vec::with_capacity(names.len());
                for t in names {
                    alts.push(self.typed(t, schema, place, depth, base)?);
                }
                Some(Expr::alt(alts))
            }
            _ if obj.contains_key("properties") => self.typed("object", schema, place, depth, base),
            _ if obj.contains_key("items") => self.typed("array", schema, place, depth, base),
            _ => Some(self.any()),
        }
    }

    fn typed(
        &mut self,
        t: &str,
        schema: &Value,
        place: Place,
        depth: usize,
        base: &str,
    ) -> Option<Expr> {
        if t == "string"
            && let Some(kind) = PathKind::of_schema(schema)
        {
            // The known paths of its kind where the grammar has them, else one bounded line (which
            // an action's argument may also triple-quote).
            return Some(match self.known_path(kind) {
                Some(paths) => paths,
                None => self.path_string(place),
            });
        }
        Some(match t {
            "string" if place == Place::Argument => {
                Expr::alt([self.string(), self.triple_string()])
            }
            "string" => self.string(),
            "integer" => self.integer(),
            "number" => self.number(),
            "boolean" => self.boolean(),
            "null" => Expr::lit("null"),
            "array" => return self.array(schema, depth, base),
            "object" => return self.object(schema, depth, base),
            _ => self.any(),
        })
    }

    /// An array: its own rule, the item a name or a short expression.
    fn array(&mut self, schema: &Value, depth: usize, base: &str) -> Option<Expr> {
        let name = self.reserve(base);
        let item = match schema.get("items") {
            Some(items) => {
                self.budget.path.push("items".into());
                let e = self.schema(items, Place::Json, depth + 1, &format!("{name}-item"));
                self.budget.path.pop();
                e
            }
            None => self.any(),
        };
        let count = |k: &str| {
            schema
                .get(k)
                .and_then(Value::as_u64)
                .map(|n| n.min(64) as u32)
        };
        let min = count("minItems").unwrap_or(0);
        let max = count("maxItems").filter(|&m| m >= min);
        let ws = self.ws();
        let sep = Expr::seq([ws.clone(), Expr::lit(","), ws.clone()]);
        let items = if max == Some(0) {
            Expr::Seq(Vec::new())
        } else {
            let more = Expr::seq([sep, item.clone()])
                .repeat(min.saturating_sub(1), max.map(|m| m.saturating_sub(1)));
            let list = Expr::seq([item, more]);
            if min == 0 { list.opt() } else { list }
        };
        let e = Expr::seq([Expr::lit("["), ws.clone(), items, ws, Expr::lit("]")]);
        self.define_charged(&name, e).then(|| Expr::rule(name))
    }

    /// An object with `properties`: its own rule, its members in declared order.
    fn object(&mut self, schema: &Value, depth: usize, base: &str) -> Option<Expr> {
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            self.any();
            return Some(Expr::rule("object"));
        };
        let name = self.reserve(base);
        let required = required(schema);
        let ws = self.ws();
        let member = |key: &str| {
            let key = Expr::lit(serde_json::to_string(key).unwrap_or_default());
            let ws = ws.clone();
            move |value: Expr| {
                Expr::seq([key.clone(), ws.clone(), Expr::lit(":"), ws.clone(), value])
            }
        };
        let least = props
            .keys()
            .map(|k| member(k)(Expr::rule("value")).gbnf_len())
            .sum();
        let mut members = Members::start(self, &name, props.len(), least, required.is_empty())?;
        for (key, prop) in props {
            self.budget
                .path
                .push(format!("properties/{}", pointer_segment(key)));
            let base = name_piece(&name, key);
            members.add(
                self,
                required.contains(key.as_str()),
                |v| v.schema(prop, Place::Json, depth + 1, &base),
                member(key),
            );
            self.budget.path.pop();
        }
        let sep = Expr::seq([ws.clone(), Expr::lit(","), ws.clone()]);
        let body = members.finish(self, &sep)?;
        let e = Expr::seq([Expr::lit("{"), ws.clone(), body, ws, Expr::lit("}")]);
        self.define_charged(&name, e).then(|| Expr::rule(name))
    }

    /// Whether `bytes` more of schema rules fit the budget.
    pub(super) fn room(&self, bytes: usize) -> bool {
        let b = &self.budget;
        b.used_schema.saturating_add(bytes) <= SCHEMA_BUDGET
            && b.used_total.saturating_add(bytes) <= GRAMMAR_BUDGET
    }

    /// Count `bytes` against the budget before the rule they are for is written.
    pub(super) fn hold(&mut self, bytes: usize) {
        self.budget.used_schema += bytes;
        self.budget.used_total += bytes;
    }

    /// Give back bytes held with [`Values::hold`].
    pub(super) fn release(&mut self, bytes: usize) {
        self.budget.used_schema = self.budget.used_schema.saturating_sub(bytes);
        self.budget.used_total = self.budget.used_total.saturating_sub(bytes);
    }

    /// Define a rule if it fits the budget, counting its bytes; `false` (nothing defined or
    /// counted) when it does not.
    pub(super) fn define_charged(&mut self, name: &str, expr: Expr) -> bool {
        // `name ::= …\n`
        let bytes = name.len() + 5 + expr.gbnf_len() + 1;
        if !self.room(bytes) {
            return false;
        }
        self.budget.used_schema += bytes;
        self.budget.used_total += bytes;
        self.g.define(name, expr);
        true
    }

    /// A fresh rule name, held by an empty rule until the caller defines it (so the rules of
    /// its members, named after it, cannot take it).
    pub(super) fn reserve(&mut self, base: &str) -> String {
        let name = self.fresh(base);
        self.g.define(name.clone(), Expr::Seq(Vec::new()));
        name
    }

    /// Keep `name` (already a clean rule name) for a rule the caller defines only after the
    /// rules [`Values::fresh`] names: fresh never hands it out. Without it, a name that
    /// sanitises to it (tool `_`: `call-_` is `call`) would take it first, and the caller's
    /// rule would then replace that one.
    pub(super) fn keep_name(&mut self, name: &str) {
        // `fresh` tries `name` itself only while the name's suffix counter is 1.
        let next = self.budget.suffixes.entry(name.to_owned()).or_insert(1);
        *next = (*next).max(2);
    }

    /// A rule name from `base` that is not taken.
    pub(super) fn fresh(&mut self, base: &str) -> String {
        let mut clean = sanitize(base);
        if clean.len() > NAME_MAX {
            // Sanitised names are ASCII: any byte is a boundary.
            clean.truncate(NAME_MAX);
            while clean.ends_with('-') {
                clean.pop();
            }
        }
        let next = self.budget.suffixes.entry(clean.clone()).or_insert(1);
        loop {
            let candidate = if *next == 1 {
                clean.clone()
            } else {
                format!("{clean}-{next}")
            };
            *next += 1;
            if !self.g.has(&candidate) {
                return candidate;
            }
        }
    }

    pub(super) fn mark(&self) -> Mark {
        Mark {
            rules: self.g.rules().len(),
            used_total: self.budget.used_total,
            used_schema: self.budget.used_schema,
            simplified: self.budget.simplified,
        }
    }

    /// Take back every rule defined since `mark`, and what was counted and noted for them.
    pub(super) fn rollback(&mut self, mark: Mark) {
        self.g.truncate(mark.rules);
        let b = &mut self.budget;
        b.used_total = mark.used_total;
        b.used_schema = mark.used_schema;
        b.simplified = mark.simplified;
        if b.simplified == 0 {
            b.first_simplified = None;
        }
    }

    /// Any JSON value, in place of the part of the schema where the builder is.
    pub(super) fn simplify(&mut self) -> Expr {
        let b = &mut self.budget;
        b.simplified += 1;
        if b.first_simplified.is_none() {
            let mut pointer = String::new();
            for seg in &b.path {
                pointer.push('/');
                pointer.push_str(seg);
            }
            if pointer.len() > POINTER_MAX {
                let mut cut = POINTER_MAX;
                while !pointer.is_char_boundary(cut) {
                    cut -= 1;
                }
                pointer.truncate(cut);
                pointer.push('…');
            }
            b.first_simplified = Some(pointer);
        }
        self.any()
    }
}

/// A literal JSON value (for `const` and `enum`).
fn literal(v: &Value) -> Expr {
    Expr::lit(serde_json::to_string(v).unwrap_or_else(|_| "null".into()))
}

/// The rule-name base of a member: the parent's name and (the start of) the key.
fn name_piece(parent: &str, key: &str) -> String {
    let key: String = key.chars().take(NAME_MAX).collect();
    format!("{parent}-{key}")
}

/// A key as a JSON Pointer segment (`~` and `/` escaped), cut to a bounded length.
fn pointer_segment(key: &str) -> String {
    let mut out = String::new();
    for c in key.chars().take(POINTER_MAX) {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}

/// The names in a schema's `required` (a set: objects may have thousands of members).
pub(super) fn required(schema: &Value) -> HashSet<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}
