//! Values: strings that can never close a protocol block, numbers the action parser reads, and
//! any JSON value (`schema.rs` narrows values to what a JSON Schema allows).
//!
//! One set of value rules serves both places values occur: an action's arguments (the action
//! grammar reads JSON-shaped values, plus `"""…"""` strings) and a final answer that must be
//! JSON. Strings are written with the escapes both readers agree on (`\" \\ \n \r \t \uXXXX`),
//! and their content can never spell a protocol tag (`<action`, `</final_answer`, `<think`, … in
//! any case), so no string can end a block early or be taken for reasoning.

use super::budget::Budget;
use super::expr::{ClassItem, Expr, Grammar};
use super::paths::PathKind;

/// Where a value is written: in an action's arguments (top-level strings may be triple-quoted)
/// or in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// A top-level argument of an action.
    Argument,
    /// Inside JSON (a final answer, or nested in an argument).
    Json,
}

/// Builds value rules into a grammar, each shared rule defined once.
pub(super) struct Values<'g> {
    pub(super) g: &'g mut Grammar,
    /// The words no string may contain (lowercase; matched without regard to case).
    pub(super) forbidden: Vec<String>,
    /// What the schemas' rules may still take, and where the schema being built is.
    pub(super) budget: Budget,
}

/// A character class from characters and ranges.
pub(super) fn chars(negated: bool, items: &[ClassItem]) -> Expr {
    Expr::class(negated, items.iter().copied())
}

impl<'g> Values<'g> {
    /// Value rules written into `g`; no string will contain one of `forbidden` (lowercase).
    pub(super) fn new(g: &'g mut Grammar, forbidden: Vec<String>) -> Self {
        Values {
            g,
            forbidden,
            budget: Budget::default(),
        }
    }

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

    /// A string naming one of the known paths of `kind` (see [`KnownPaths`](super::KnownPaths)): the rule
    /// `path-file`, `path-dir` or `path-any`, shared by every parameter of that kind. `None`
    /// (the caller writes a free string) when no such path is known or the rule does not fit
    /// the budget.
    ///
    /// Each path is written as the reader reads it back: a JSON string (quotes, backslashes and
    /// control characters escaped), and where the path would spell a protocol tag (a folder
    /// `x<` holding `action` is the path `x</action`) its `<` written `\u003c`, so no path can
    /// end the block it is in.
    pub(super) fn known_path(&mut self, kind: PathKind) -> Option<Expr> {
        let name = format!("path-{}", kind.as_str());
        if self.g.has(&name) {
            return Some(Expr::rule(name));
        }
        let paths = self.g.known_paths().of_kind(kind);
        if paths.is_empty() {
            return None;
        }
        let alts: Vec<Expr> = paths
            .iter()
            .map(|p| Expr::lit(path_literal(p, &self.forbidden)))
            .collect();
        self.define_charged(&name, Expr::alt(alts))
            .then(|| Expr::rule(name))
    }

    /// `path-string`: a path the grammar does not list, one line of at least one character in
    /// double quotes (no counted bound: llama.cpp expands `x{1,N}` into N rules; a line that
    /// runs on is the counting guard's and the turn budget's to end). No quote, backslash or control character (so no escape and
    /// no newline) and no `<` (so no protocol tag) inside: what a workspace path holds. In an
    /// action's arguments the same body may also be triple-quoted (`path="""notes.txt"""`):
    /// SmolLM2's likeliest token after `path=` is `"""`, and refused it the model wrote a count
    /// into the path instead. A path with one of those characters in its name can be named only
    /// where the grammar lists it ([`known_path`](Self::known_path) writes it escaped).
    pub(super) fn path_string(&mut self, place: Place) -> Expr {
        if !self.g.has("path-body") {
            let char = chars(
                true,
                &[
                    ClassItem::Char('"'),
                    ClassItem::Char('\\'),
                    ClassItem::Char('<'),
                    ClassItem::Range('\u{0}', '\u{1f}'),
                    ClassItem::Char('\u{7f}'),
                ],
            );
            self.g.define("path-body", char.repeat(1, None));
            self.g.define(
                "path-string",
                Expr::seq([Expr::lit("\""), Expr::rule("path-body"), Expr::lit("\"")]),
            );
        }
        if place == Place::Argument {
            if !self.g.has("path-triple") {
                let quotes = || Expr::lit("\"\"\"");
                self.g.define(
                    "path-triple",
                    Expr::seq([quotes(), Expr::rule("path-body"), quotes()]),
                );
            }
            return Expr::alt([Expr::rule("path-string"), Expr::rule("path-triple")]);
        }
        Expr::rule("path-string")
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
}

/// A path as a JSON string the protocol's readers read back, never spelling one of `forbidden`
/// (lowercase words, each starting with `<`).
pub(super) fn path_literal(path: &str, forbidden: &[String]) -> String {
    let json = serde_json::to_string(path).unwrap_or_else(|_| "\"\"".into());
    let lower = json.to_lowercase();
    if forbidden.iter().any(|w| lower.contains(w.as_str())) {
        // Every forbidden word starts with `<`: with no `<` left, none can be spelled.
        json.replace('<', "\\u003c")
    } else {
        json
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
