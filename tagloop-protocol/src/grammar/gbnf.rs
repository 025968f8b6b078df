//! Reading GBNF text back: the check run on every grammar before it is sent.
//!
//! llama.cpp takes an invalid grammar without complaint and then samples freely, so the text is
//! parsed here first, with llama.cpp's rules: one rule per line (a newline inside parentheses
//! continues it), `#` comments, literals and classes with `\x`, `\u`, `\U`, `\t`, `\r`, `\n`,
//! `\\`, `\"`, `\[`, `\]` escapes, `.`, postfix `* + ? {m} {m,} {m,n}`. Beyond syntax it refuses
//! what llama.cpp refuses when it does check: a missing `root`, a reference to an undefined rule,
//! left recursion, inverted ranges, and repetitions over its limit (2,000, counted for a
//! repeated group as the rules it synthesizes times the repetitions).

use std::collections::{HashMap, HashSet};

use super::expr::{ClassItem, Expr, Grammar};

/// Why a grammar text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GbnfError {
    /// The text does not follow GBNF's syntax.
    #[error("grammar syntax error at line {line}: {message}")]
    Syntax {
        /// 1-based line.
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// No rule named `root`.
    #[error("the grammar has no `root` rule")]
    NoRoot,
    /// A rule refers to a rule that is not defined.
    #[error("rule `{rule}` refers to undefined rule `{missing}`")]
    Undefined {
        /// The rule whose expression names the missing one.
        rule: String,
        /// The first name in `rule` that no rule defines (later ones are not reported).
        missing: String,
    },
    /// A rule can reach itself without consuming a character.
    #[error("rule `{0}` is left-recursive")]
    LeftRecursion(String),
}

/// Parse and check GBNF text; the rules come back as a [`Grammar`].
///
/// ```
/// use tagloop_protocol::parse_gbnf;
///
/// assert!(parse_gbnf("root ::= \"a\" b*\nb ::= [0-9]\n").is_ok());
/// let err = parse_gbnf("root ::= b\n").unwrap_err();
/// assert_eq!(err.to_string(), "rule `root` refers to undefined rule `b`");
/// ```
pub fn parse_gbnf(text: &str) -> Result<Grammar, GbnfError> {
    let mut p = Parser {
        s: text.as_bytes(),
        text,
        i: 0,
    };
    let mut g = Grammar::new();
    loop {
        p.skip_space(true);
        if p.i >= p.s.len() {
            break;
        }
        let name = p.name()?;
        p.skip_space(false);
        if !p.eat("::=") {
            return Err(p.error(format!("expected `::=` after the rule name `{name}`")));
        }
        let expr = p.alternatives(false)?;
        p.skip_space(false);
        match p.peek() {
            None | Some(b'\n') => {}
            Some(_) => return Err(p.error("unexpected character")),
        }
        g.define(name, expr);
    }
    check(&g)?;
    Ok(g)
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    i: usize,
}

impl Parser<'_> {
    fn error(&self, message: impl Into<String>) -> GbnfError {
        let line = self.s[..self.i.min(self.s.len())]
            .iter()
            .filter(|&&c| c == b'\n')
            .count()
            + 1;
        GbnfError::Syntax {
            line,
            message: message.into(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, lit: &str) -> bool {
        if self.s[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }

    /// Spaces, tabs and comments; newlines too when `newlines`.
    fn skip_space(&mut self, newlines: bool) {
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' | b'\r' => self.i += 1,
                b'\n' if newlines => self.i += 1,
                b'#' => {
                    while self.peek().is_some_and(|c| c != b'\n') {
                        self.i += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn name(&mut self) -> Result<String, GbnfError> {
        let start = self.i;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        {
            self.i += 1;
        }
        if start == self.i {
            return Err(self.error("expected a rule name"));
        }
        Ok(self.text[start..self.i].to_owned())
    }

    fn alternatives(&mut self, nested: bool) -> Result<Expr, GbnfError> {
        let mut alts = vec![self.sequence(nested)?];
        while self.peek() == Some(b'|') {
            self.i += 1;
            self.skip_space(true);
            alts.push(self.sequence(nested)?);
        }
        Ok(if alts.len() == 1 {
            alts.pop().unwrap_or(Expr::Seq(Vec::new()))
        } else {
            Expr::Alt(alts)
        })
    }

    fn sequence(&mut self, nested: bool) -> Result<Expr, GbnfError> {
        let mut items = Vec::new();
        loop {
            self.skip_space(nested);
            let item = match self.peek() {
                Some(b'"') => {
                    self.i += 1;
                    Expr::Lit(self.literal()?)
                }
                Some(b'[') => {
                    self.i += 1;
                    self.class()?
                }
                Some(b'.') => {
                    self.i += 1;
                    Expr::Class {
                        negated: true,
                        items: Vec::new(),
                    }
                }
                Some(b'(') => {
                    self.i += 1;
                    self.skip_space(true);
                    let inner = self.alternatives(true)?;
                    self.skip_space(true);
                    if self.peek() != Some(b')') {
                        return Err(self.error("expected `)`"));
                    }
                    self.i += 1;
                    inner
                }
                Some(c) if c.is_ascii_alphanumeric() || c == b'-' || c == b'_' => {
                    let save = self.i;
                    let name = self.name()?;
                    // A name followed by `::=` starts the next rule (on a later line).
                    let mut look = Parser {
                        s: self.s,
                        text: self.text,
                        i: self.i,
                    };
                    look.skip_space(false);
                    if look.eat("::=") {
                        self.i = save;
                        return Err(self.error("a rule definition inside another rule"));
                    }
                    Expr::Ref(name)
                }
                _ => break,
            };
            // llama.cpp refuses a repeated group whose synthesized rules times the repetition
            // exceed its limit: count them as it does.
            let group = match &item {
                Expr::Seq(_) | Expr::Alt(_) => Some(1 + created(&item)),
                _ => None,
            };
            let item = self.postfix(item, group.unwrap_or(1).max(1))?;
            items.push(item);
        }
        Ok(match items.len() {
            0 => Expr::Seq(Vec::new()),
            1 => items.pop().unwrap_or(Expr::Seq(Vec::new())),
            _ => Expr::Seq(items),
        })
    }

    fn postfix(&mut self, mut item: Expr, mut n_prev: u64) -> Result<Expr, GbnfError> {
        loop {
            let (min, max) = match self.peek() {
                Some(b'*') => (0, None),
                Some(b'+') => (1, None),
                Some(b'?') => (0, Some(1)),
                Some(b'{') => {
                    self.i += 1;
                    let min = self.number()?;
                    let max = if self.eat(",") {
                        if self.peek() == Some(b'}') {
                            None
                        } else {
                            Some(self.number()?)
                        }
                    } else {
                        Some(min)
                    };
                    if self.peek() != Some(b'}') {
                        return Err(self.error("expected `}` after a repetition count"));
                    }
                    if max.is_some_and(|m| m < min) {
                        return Err(self.error("a repetition's maximum is below its minimum"));
                    }
                    if min > MAX_REPETITIONS {
                        return Err(self.error(format!(
                            "more than {MAX_REPETITIONS} repetitions (llama.cpp's limit)"
                        )));
                    }
                    (min, max)
                }
                _ => return Ok(item),
            };
            self.i += 1;
            let total = match max {
                Some(m) if m > 0 && m <= MAX_REPETITIONS => u64::from(m),
                _ if min > 0 => u64::from(min),
                _ => 1,
            };
            if n_prev * total > u64::from(MAX_REPETITIONS) {
                return Err(self.error(format!(
                    "a repeated group makes {n_prev} rules times {total} repetitions, over llama.cpp's limit of {MAX_REPETITIONS}: repeat a rule reference instead"
                )));
            }
            n_prev *= total;
            item = item.repeat(min, max);
        }
    }

    fn number(&mut self) -> Result<u32, GbnfError> {
        self.skip_space(false);
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        let n = self.text[start..self.i]
            .parse()
            .map_err(|_| self.error("expected a number in a repetition count"))?;
        self.skip_space(false);
        Ok(n)
    }

    fn char(&mut self, end: u8) -> Result<char, GbnfError> {
        let rest = &self.text[self.i..];
        let Some(c) = rest.chars().next() else {
            return Err(self.error(format!("unterminated: expected `{}`", end as char)));
        };
        if c == '\n' && end == b'"' {
            return Err(self.error("a newline inside a literal (write \\n)"));
        }
        self.i += c.len_utf8();
        if c != '\\' {
            return Ok(c);
        }
        let Some(e) = self.text[self.i..].chars().next() else {
            return Err(self.error("an escape at the end of the text"));
        };
        self.i += e.len_utf8();
        let hex = |p: &mut Self, n: usize| -> Result<char, GbnfError> {
            let digits = p.text.get(p.i..p.i + n).unwrap_or("");
            let v = u32::from_str_radix(digits, 16)
                .ok()
                .filter(|_| digits.len() == n)
                .and_then(char::from_u32)
                .ok_or_else(|| p.error(format!("`\\{e}` needs {n} hex digits")))?;
            p.i += n;
            Ok(v)
        };
        Ok(match e {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            '\\' | '"' | '[' | ']' => e,
            'x' => hex(self, 2)?,
            'u' => hex(self, 4)?,
            'U' => hex(self, 8)?,
            _ => return Err(self.error(format!("unknown escape `\\{e}`"))),
        })
    }

    fn literal(&mut self) -> Result<String, GbnfError> {
        let mut out = String::new();
        loop {
            if self.peek() == Some(b'"') {
                self.i += 1;
                return Ok(out);
            }
            out.push(self.char(b'"')?);
        }
    }

    fn class(&mut self) -> Result<Expr, GbnfError> {
        let negated = self.eat("^");
        let mut items = Vec::new();
        loop {
            if self.peek() == Some(b']') {
                self.i += 1;
                return Ok(Expr::Class { negated, items });
            }
            let a = self.char(b']')?;
            if self.peek() == Some(b'-') && self.s.get(self.i + 1) != Some(&b']') {
                self.i += 1;
                let b = self.char(b']')?;
                if b < a {
                    return Err(self.error(format!("an inverted range `{a}-{b}`")));
                }
                items.push(ClassItem::Range(a, b));
            } else {
                items.push(ClassItem::Char(a));
            }
        }
    }
}

/// llama.cpp's `MAX_REPETITION_THRESHOLD`.
const MAX_REPETITIONS: u32 = 2000;

/// The rules llama.cpp synthesizes for an expression inside a group (one per repetition step,
/// one per nested group).
fn created(e: &Expr) -> u64 {
    match e {
        Expr::Lit(_) | Expr::Class { .. } | Expr::Ref(_) => 0,
        Expr::Seq(v) | Expr::Alt(v) => v.iter().map(created).sum(),
        Expr::Repeat { expr, min, max } => {
            let inner = match **expr {
                Expr::Seq(_) | Expr::Alt(_) => 1 + created(expr),
                _ => created(expr),
            };
            inner
                + match max {
                    Some(m) => u64::from(m.saturating_sub(*min)),
                    None => 1,
                }
        }
    }
}

/// Root present, references defined, no left recursion.
fn check(g: &Grammar) -> Result<(), GbnfError> {
    if !g.has("root") {
        return Err(GbnfError::NoRoot);
    }
    for (name, expr) in g.rules() {
        let mut refs = Vec::new();
        collect_refs(expr, &mut refs);
        if let Some(missing) = refs.into_iter().find(|r| !g.has(r)) {
            return Err(GbnfError::Undefined {
                rule: name.clone(),
                missing: missing.to_owned(),
            });
        }
    }
    // Which rules can match the empty string (a fixpoint).
    let mut nullable: HashSet<&str> = HashSet::new();
    loop {
        let before = nullable.len();
        for (name, expr) in g.rules() {
            if is_nullable(expr, &nullable) {
                nullable.insert(name);
            }
        }
        if nullable.len() == before {
            break;
        }
    }
    // The rules each rule can start with, then a cycle search.
    let mut firsts: HashMap<&str, Vec<&str>> = HashMap::new();
    for (name, expr) in g.rules() {
        let mut out = Vec::new();
        leftmost(expr, &nullable, &mut out);
        firsts.insert(name, out);
    }
    let mut state: HashMap<&str, u8> = HashMap::new(); // 1 on the path, 2 done
    for (name, _) in g.rules() {
        if let Some(r) = cycle(name, &firsts, &mut state) {
            return Err(GbnfError::LeftRecursion(r.to_owned()));
        }
    }
    Ok(())
}

fn collect_refs<'a>(e: &'a Expr, out: &mut Vec<&'a str>) {
    match e {
        Expr::Ref(n) => out.push(n),
        Expr::Seq(v) | Expr::Alt(v) => v.iter().for_each(|x| collect_refs(x, out)),
        Expr::Repeat { expr, .. } => collect_refs(expr, out),
        Expr::Lit(_) | Expr::Class { .. } => {}
    }
}

fn is_nullable(e: &Expr, nullable: &HashSet<&str>) -> bool {
    match e {
        Expr::Lit(s) => s.is_empty(),
        Expr::Class { .. } => false,
        Expr::Ref(n) => nullable.contains(n.as_str()),
        Expr::Seq(v) => v.iter().all(|x| is_nullable(x, nullable)),
        Expr::Alt(v) => v.iter().any(|x| is_nullable(x, nullable)),
        Expr::Repeat { expr, min, .. } => *min == 0 || is_nullable(expr, nullable),
    }
}

fn leftmost<'a>(e: &'a Expr, nullable: &HashSet<&str>, out: &mut Vec<&'a str>) {
    match e {
        Expr::Ref(n) => out.push(n),
        Expr::Seq(v) => {
            for x in v {
                leftmost(x, nullable, out);
                if !is_nullable(x, nullable) {
                    break;
                }
            }
        }
        Expr::Alt(v) => v.iter().for_each(|x| leftmost(x, nullable, out)),
        Expr::Repeat { expr, .. } => leftmost(expr, nullable, out),
        Expr::Lit(_) | Expr::Class { .. } => {}
    }
}

fn cycle<'a>(
    name: &'a str,
    firsts: &HashMap<&'a str, Vec<&'a str>>,
    state: &mut HashMap<&'a str, u8>,
) -> Option<&'a str> {
    match state.get(name) {
        Some(1) => return Some(name),
        Some(_) => return None,
        None => {}
    }
    state.insert(name, 1);
    for next in firsts.get(name).into_iter().flatten() {
        if let Some(r) = cycle(next, firsts, state) {
            return Some(r);
        }
    }
    state.insert(name, 2);
    None
}
