//! Values: strings that can never close a protocol block, numbers the action parser reads, and
//! JSON Schema turned into grammar.
//!
//! One set of value rules serves both places values occur: an action's arguments (the action
//! grammar reads JSON-shaped values, plus `"""…"""` strings) and a final answer that must be
//! JSON. Strings are written with the escapes both readers agree on (`\" \\ \n \r \t \uXXXX`),
//! and their content can never spell a protocol tag (`<action`, `</final_answer`, `<think`, … in
//! any case), so no string can end a block early or be taken for reasoning.

use serde_json::Value;

use super::expr::{ClassItem, Expr, Grammar};

/// Where a value is written: in an action's arguments (top-level strings may be triple-quoted)
/// or in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// A top-level argument of an action.
    Argument,
    /// Inside JSON (a final answer, or nested in an argument).
    Json,
}

/// The deepest schema nesting followed; deeper parts accept any JSON value.
const MAX_SCHEMA_DEPTH: usize = 24;

/// Builds value rules into a grammar, each shared rule defined once.
pub(super) struct Values<'g> {
    pub(super) g: &'g mut Grammar,
    /// The words no string may contain (lowercase; matched without regard to case).
    pub(super) forbidden: Vec<String>,
}

/// A character class from characters and ranges.
pub(super) fn chars(negated: bool, items: &[ClassItem]) -> Expr {
    Expr::class(negated, items.iter().copied())
}

impl Values<'_> {
    /// `ws`: a little whitespace (bounded, so a model cannot fill its budget with it).
    pub(super) fn ws(&mut self) -> Expr {
        if !self.g.has("ws") {
            self.g.define(
                "ws",
                chars(
                    false,
                    &[
                        ClassItem::Char(' '),
                        ClassItem::Char('\t'),
                        ClassItem::Char('\n'),
                    ],
                )
                .repeat(0, Some(8)),
            );
        }
        Expr::rule("ws")
    }

    /// A double-quoted string with the shared escapes.
    pub(super) fn string(&mut self) -> Expr {
        if !self.g.has("string") {
            let escape = Expr::seq([
                Expr::lit("\\"),
                Expr::alt([
                    chars(
                        false,
                        &[
                            ClassItem::Char('"'),
                            ClassItem::Char('\\'),
                            ClassItem::Char('n'),
                            ClassItem::Char('r'),
                            ClassItem::Char('t'),
                        ],
                    ),
                    Expr::seq([Expr::lit("u"), self.hex4()]),
                ]),
            ]);
            let body = excluding(
                self.g,
                "string-char",
                &self.forbidden,
                &[
                    ClassItem::Char('"'),
                    ClassItem::Char('\\'),
                    ClassItem::Range('\u{0}', '\u{1f}'),
                ],
                Some(escape),
                true,
            );
            self.g.define(
                "string",
                Expr::seq([Expr::lit("\""), Expr::rule(body), Expr::lit("\"")]),
            );
        }
        Expr::rule("string")
    }

    fn hex4(&mut self) -> Expr {
        if !self.g.has("hex") {
            self.g.define(
                "hex",
                chars(
                    false,
                    &[
                        ClassItem::Range('0', '9'),
                        ClassItem::Range('a', 'f'),
                        ClassItem::Range('A', 'F'),
                    ],
                ),
            );
        }
        Expr::rule("hex").repeat(4, Some(4))
    }

    /// A `"""…"""` string: raw text, no escapes, never `"""` inside.
    pub(super) fn triple_string(&mut self) -> Expr {
        if !self.g.has("triple-string") {
            let mut words = self.forbidden.clone();
            words.push("\"\"\"".into());
            let body = excluding(self.g, "triple-char", &words, &[], None, true);
            self.g.define(
                "triple-string",
                Expr::seq([Expr::lit("\"\"\""), Expr::rule(body), Expr::lit("\"\"\"")]),
            );
        }
        Expr::rule("triple-string")
    }

    /// An integer the action parser and JSON both read (at most 16 digits).
    pub(super) fn integer(&mut self) -> Expr {
        if !self.g.has("integer") {
            let digit = chars(false, &[ClassItem::Range('0', '9')]);
            let nonzero = chars(false, &[ClassItem::Range('1', '9')]);
            self.g.define(
                "integer",
                Expr::seq([
                    Expr::lit("-").opt(),
                    Expr::alt([
                        Expr::lit("0"),
                        Expr::seq([nonzero, digit.repeat(0, Some(15))]),
                    ]),
                ]),
            );
        }
        Expr::rule("integer")
    }

    /// A number: an integer with an optional fraction and a small exponent.
    pub(super) fn number(&mut self) -> Expr {
        if !self.g.has("number") {
            let int = self.integer();
            let digit = chars(false, &[ClassItem::Range('0', '9')]);
            self.g.define(
                "number",
                Expr::seq([
                    int,
                    Expr::seq([Expr::lit("."), digit.clone().repeat(1, Some(15))]).opt(),
                    Expr::seq([
                        chars(false, &[ClassItem::Char('e'), ClassItem::Char('E')]),
                        chars(false, &[ClassItem::Char('-'), ClassItem::Char('+')]).opt(),
                        digit.repeat(1, Some(2)),
                    ])
                    .opt(),
                ]),
            );
        }
        Expr::rule("number")
    }

    /// `true` or `false`.
    pub(super) fn boolean(&mut self) -> Expr {
        Expr::alt([Expr::lit("true"), Expr::lit("false")])
    }

    /// Any JSON value (`value`, `object`, `array` rules).
    pub(super) fn any(&mut self) -> Expr {
        if !self.g.has("value") {
            // Defined first so the recursive references below resolve to it.
            self.g.define("value", Expr::Seq(Vec::new()));
            let (s, n, ws) = (self.string(), self.number(), self.ws());
            let sep = Expr::seq([ws.clone(), Expr::lit(","), ws.clone()]);
            let member = Expr::seq([
                s.clone(),
                ws.clone(),
                Expr::lit(":"),
                ws.clone(),
                Expr::rule("value"),
            ]);
            self.g.define(
                "object",
                Expr::seq([
                    Expr::lit("{"),
                    ws.clone(),
                    Expr::seq([
                        member.clone(),
                        Expr::seq([sep.clone(), member]).repeat(0, None),
                    ])
                    .opt(),
                    ws.clone(),
                    Expr::lit("}"),
                ]),
            );
            self.g.define(
                "array",
                Expr::seq([
                    Expr::lit("["),
                    ws.clone(),
                    Expr::seq([
                        Expr::rule("value"),
                        Expr::seq([sep, Expr::rule("value")]).repeat(0, None),
                    ])
                    .opt(),
                    ws,
                    Expr::lit("]"),
                ]),
            );
            // Scalars first: the tests' sampler prefers the first choice when deep.
            self.g.define(
                "value",
                Expr::alt([
                    s,
                    n,
                    Expr::lit("true"),
                    Expr::lit("false"),
                    Expr::lit("null"),
                    Expr::rule("object"),
                    Expr::rule("array"),
                ]),
            );
        }
        Expr::rule("value")
    }

    /// A literal JSON value (for `const` and `enum`).
    fn literal(&mut self, v: &Value) -> Expr {
        Expr::lit(serde_json::to_string(v).unwrap_or_else(|_| "null".into()))
    }

    /// The values a JSON Schema accepts, as far as grammar can say it: `type`, `properties`,
    /// `required`, `items`, `minItems`/`maxItems`, `enum`, `const`, `anyOf`/`oneOf`, nested
    /// objects. Anything else (`$ref`, `pattern`, `allOf` of several, …) accepts any JSON value
    /// of the type given, and validation after the turn still applies.
    pub(super) fn schema(&mut self, schema: &Value, place: Place, depth: usize) -> Expr {
        let Some(obj) = schema.as_object() else {
            return self.any();
        };
        if depth > MAX_SCHEMA_DEPTH || obj.contains_key("$ref") {
            return self.any();
        }
        if let Some(c) = obj.get("const") {
            return self.literal(c);
        }
        if let Some(Value::Array(options)) = obj.get("enum")
            && !options.is_empty()
        {
            return Expr::alt(options.iter().map(|v| self.literal(v)).collect::<Vec<_>>());
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = obj.get(key)
                && !options.is_empty()
            {
                let alts: Vec<Expr> = options
                    .iter()
                    .map(|s| self.schema(s, place, depth + 1))
                    .collect();
                return Expr::alt(alts);
            }
        }
        if let Some(Value::Array(all)) = obj.get("allOf")
            && let [only] = all.as_slice()
        {
            return self.schema(only, place, depth + 1);
        }
        match obj.get("type") {
            Some(Value::String(t)) => self.typed(t, schema, place, depth),
            Some(Value::Array(types)) if !types.is_empty() => {
                let alts: Vec<Expr> = types
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|t| self.typed(t, schema, place, depth))
                    .collect();
                if alts.is_empty() {
                    self.any()
                } else {
                    Expr::alt(alts)
                }
            }
            _ if obj.contains_key("properties") => self.typed("object", schema, place, depth),
            _ if obj.contains_key("items") => self.typed("array", schema, place, depth),
            _ => self.any(),
        }
    }

    fn typed(&mut self, t: &str, schema: &Value, place: Place, depth: usize) -> Expr {
        match t {
            "string" if place == Place::Argument => {
                Expr::alt([self.string(), self.triple_string()])
            }
            "string" => self.string(),
            "integer" => self.integer(),
            "number" => self.number(),
            "boolean" => self.boolean(),
            "null" => Expr::lit("null"),
            "array" => self.array(schema, depth),
            "object" => self.object(schema, depth),
            _ => self.any(),
        }
    }

    fn array(&mut self, schema: &Value, depth: usize) -> Expr {
        let item = match schema.get("items") {
            Some(items) => self.schema(items, Place::Json, depth + 1),
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
        Expr::seq([Expr::lit("["), ws.clone(), items, ws, Expr::lit("]")])
    }

    fn object(&mut self, schema: &Value, depth: usize) -> Expr {
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            self.any();
            return Expr::rule("object");
        };
        let required = required(schema);
        let ws = self.ws();
        let mut req = Vec::new();
        let mut opt = Vec::new();
        for (name, prop) in props {
            let key = Expr::lit(serde_json::to_string(name).unwrap_or_default());
            let value = self.schema(prop, Place::Json, depth + 1);
            let member = Expr::seq([key, ws.clone(), Expr::lit(":"), ws.clone(), value]);
            if required.contains(&name.as_str()) {
                req.push(member);
            } else {
                opt.push(member);
            }
        }
        let sep = Expr::seq([ws.clone(), Expr::lit(","), ws.clone()]);
        let members = comma_list(req, opt, &sep);
        Expr::seq([Expr::lit("{"), ws.clone(), members, ws, Expr::lit("}")])
    }
}

/// The names in a schema's `required`.
pub(super) fn required(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Every required item in order, then any of the optional ones in order, separated by `sep`.
pub(super) fn comma_list(required: Vec<Expr>, optional: Vec<Expr>, sep: &Expr) -> Expr {
    if !required.is_empty() {
        let mut items = Vec::new();
        for (i, r) in required.into_iter().enumerate() {
            if i > 0 {
                items.push(sep.clone());
            }
            items.push(r);
        }
        for o in optional {
            items.push(Expr::seq([sep.clone(), o]).opt());
        }
        return Expr::seq(items);
    }
    // No required item: the first one present has no separator before it.
    let mut alts = Vec::new();
    for first in 0..optional.len() {
        let mut items = vec![optional[first].clone()];
        for o in &optional[first + 1..] {
            items.push(Expr::seq([sep.clone(), o.clone()]).opt());
        }
        alts.push(Expr::seq(items));
    }
    if alts.is_empty() {
        Expr::Seq(Vec::new())
    } else {
        Expr::alt(alts).opt()
    }
}

/// Text that never contains one of `words` (lowercase; matched without regard to ASCII case):
/// rules `{name}-0`, `{name}-1`, … , one per state of a word-matching automaton, the state being
/// the longest tail of the text so far that begins a word. Characters in `excluded`
/// (a JSON string's quote, backslash and control characters) never occur on their own; `unit` (an escape sequence) may stand anywhere a character can. When
/// `end_anywhere` is false the text cannot stop halfway into a word (nor be empty of content
/// after a partial word), so no reader mistakes its end for a cut tag.
///
/// Returns the name of the start rule.
pub(super) fn excluding(
    g: &mut Grammar,
    name: &str,
    words: &[String],
    excluded: &[ClassItem],
    unit: Option<Expr>,
    end_anywhere: bool,
) -> String {
    // States: every proper prefix of a word that contains no word.
    let mut states: Vec<String> = vec![String::new()];
    for w in words {
        for (i, _) in w.char_indices().skip(1) {
            let p = &w[..i];
            if !states.iter().any(|s| s == p) && !words.iter().any(|w2| p.contains(w2.as_str())) {
                states.push(p.to_owned());
            }
        }
    }
    let mut alphabet: Vec<char> = words.iter().flat_map(|w| w.chars()).collect();
    alphabet.sort_unstable();
    alphabet.dedup();
    let base = g.fresh_name(name);
    let rule_name = |i: usize| format!("{base}-{i}");
    for (si, state) in states.iter().enumerate() {
        // Where each character of the words leads from here: nowhere (it would complete a
        // word), back to the start, or to a longer partial word.
        let mut targets: Vec<(usize, Vec<ClassItem>)> = Vec::new();
        let mut not_to_start: Vec<ClassItem> = excluded.to_vec();
        for &c in &alphabet {
            let cased = |c: char| {
                let mut v = vec![ClassItem::Char(c)];
                if c.is_ascii_lowercase() {
                    v.push(ClassItem::Char(c.to_ascii_uppercase()));
                }
                v
            };
            if excluded.iter().any(|x| x.contains(c)) {
                continue;
            }
            let t = format!("{state}{c}");
            if words.iter().any(|w| t.ends_with(w.as_str())) {
                not_to_start.extend(cased(c));
                continue;
            }
            let next = (0..t.len())
                .filter(|&k| t.is_char_boundary(k))
                .map(|k| &t[k..])
                .find_map(|tail| states.iter().position(|s| s == tail))
                .unwrap_or(0);
            if next == 0 {
                continue;
            }
            not_to_start.extend(cased(c));
            match targets.iter_mut().find(|(n, _)| *n == next) {
                Some((_, v)) => v.extend(cased(c)),
                None => targets.push((next, cased(c))),
            }
        }
        let mut alts = Vec::new();
        if si == 0 || end_anywhere {
            alts.push(Expr::lit(""));
        }
        // Every other character goes back to the start.
        alts.push(Expr::seq([
            Expr::class(true, not_to_start),
            Expr::rule(rule_name(0)),
        ]));
        if let Some(u) = &unit {
            alts.push(Expr::seq([u.clone(), Expr::rule(rule_name(0))]));
        }
        for (next, items) in targets {
            alts.push(Expr::seq([
                Expr::class(false, items),
                Expr::rule(rule_name(next)),
            ]));
        }
        g.define(rule_name(si), Expr::Alt(alts));
    }
    rule_name(0)
}
