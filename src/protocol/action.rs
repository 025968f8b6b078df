//! The action grammar (SPEC §1.2), written with nom 8.
//!
//! The structure (tool name, parentheses, argument names, numbers, keywords, punctuation) is read
//! with nom combinators over a custom error type, [`PErr`], that keeps the *furthest* point reached
//! and merges what was expected there (nom's default `ParseError::or` keeps the last branch).
//! Strings are read by hand-written functions plugged into the nom parsers, because of the
//! quote-closing rule: a quote closes a string only where the action can go on after it.
//!
//! When several closing quotes fit, the parse is deterministic given a *choice vector* (for the
//! i-th string met, take its k-th candidate close). Choice vectors are tried earliest-first
//! (depth first, like an odometer from the last string met) until a parse succeeds and the caller's
//! `accept` agrees. A fuel budget (bytes scanned, plus a cap on attempts) keeps pathological input
//! linear. If no strict parse exists, the whole search is repeated in a loose mode where `)`
//! followed by trailing junk ends the call, which is reported as a warning.

use std::cell::{Cell, RefCell};

use nom::{
    IResult, Parser,
    branch::alt,
    bytes::complete::{tag, take_while, take_while1},
    character::complete::{char, digit1, one_of},
    combinator::{not, opt, peek, recognize},
    error::{ErrorKind, ParseError},
};
use serde_json::{Map, Number, Value};

/// One argument of a call: named (`path="a"`) or positional (`"a"`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Arg {
    /// The name, or `None` for a positional argument.
    pub name: Option<String>,
    /// The value, as JSON.
    pub value: Value,
}

/// A parsed tool call.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Call {
    /// The tool name (may contain `.` and `-`: `fs.read_file`).
    pub tool: String,
    /// The arguments in the order written.
    pub args: Vec<Arg>,
    /// Leniencies used to read the call (a markdown fence around it, text after it, ...).
    pub warnings: Vec<String>,
}

/// Why an action did not parse: the furthest point reached and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[error("{message} at offset {offset}")]
pub struct ActionError {
    /// What was expected, in words a model can act on.
    pub message: String,
    /// Byte offset into the action text.
    pub offset: usize,
    /// True when the text ended inside a string that was never closed (a stop string may have cut
    /// it: the runtime then lets the model continue the same turn).
    pub open_string: bool,
}

/// A tool signature for quote disambiguation: `write_file(path, content)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// The tool name.
    pub name: String,
    /// Parameter names in declaration order.
    pub params: Vec<String>,
    /// Parameters written with a trailing `?` (`read_file(path, start_line?)`): they may be left out.
    pub optional: Vec<String>,
}

/// A tool signature that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad tool signature `{text}`: {reason} (expected something like `write_file(path, content)`)"
)]
pub struct SignatureError {
    /// The signature as given.
    pub text: String,
    /// What was wrong.
    pub reason: String,
}

impl Signature {
    /// Read a signature such as `write_file(path, content)` or `read_file(path, start_line?, end_line?)`.
    ///
    /// ```
    /// use tagloop::protocol::Signature;
    ///
    /// let sig = Signature::parse("read_file(path, start_line?)").unwrap();
    /// assert_eq!(sig.name, "read_file");
    /// assert_eq!(sig.params, ["path", "start_line"]);
    /// assert_eq!(sig.optional, ["start_line"]);
    /// assert!(Signature::parse("read_file(").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Signature, SignatureError> {
        let err = |reason: &str| SignatureError {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        let t = text.trim();
        let (rest, name) = tool_ident(t).map_err(|_| err("expected a tool name"))?;
        let rest = rest.trim_start();
        let Some(inner) = rest
            .strip_prefix('(')
            .and_then(|r| r.trim_end().strip_suffix(')'))
        else {
            return Err(err("expected `(`, the parameter names and `)`"));
        };
        let mut params = Vec::new();
        let mut optional = Vec::new();
        for part in inner.split(',') {
            let p = part.trim();
            if p.is_empty() {
                continue;
            }
            let (p, opt) = match p.strip_suffix('?') {
                Some(p) => (p.trim_end(), true),
                None => (p, false),
            };
            match ident(p) {
                Ok(("", _)) => {}
                _ => return Err(err(&format!("`{p}` is not a parameter name"))),
            }
            if params.iter().any(|q| q == p) {
                return Err(err(&format!("parameter `{p}` is declared twice")));
            }
            params.push(p.to_string());
            if opt {
                optional.push(p.to_string());
            }
        }
        Ok(Signature {
            name: name.to_string(),
            params,
            optional,
        })
    }

    /// Whether `call` binds to this signature: no unknown or duplicate argument, not too many
    /// positional ones, every required parameter given. A call to another tool is not judged
    /// (returns true).
    ///
    /// ```
    /// use tagloop::protocol::{parse_action, Signature};
    ///
    /// let sig = Signature::parse("write_file(path, content)").unwrap();
    /// assert!(sig.accepts(&parse_action(r#"write_file("a", content="b")"#).unwrap()));
    /// assert!(!sig.accepts(&parse_action(r#"write_file(path="a", title="b")"#).unwrap()));
    /// ```
    pub fn accepts(&self, call: &Call) -> bool {
        if call.tool != self.name {
            return true;
        }
        let mut given: Vec<&str> = Vec::new();
        let args: Vec<(Option<&str>, &Value)> = match call.args.as_slice() {
            [
                Arg {
                    name: None,
                    value: Value::Object(map),
                },
            ] if self.params.len() != 1 => map.iter().map(|(k, v)| (Some(k.as_str()), v)).collect(),
            args => args.iter().map(|a| (a.name.as_deref(), &a.value)).collect(),
        };
        let mut positional = 0;
        for (name, _) in args {
            let name = match name {
                Some(n) => n,
                None => {
                    positional += 1;
                    match self.params.get(positional - 1) {
                        Some(p) => p.as_str(),
                        None => return false,
                    }
                }
            };
            if !self.params.iter().any(|p| p == name) || given.contains(&name) {
                return false;
            }
            given.push(name);
        }
        self.params
            .iter()
            .filter(|p| !self.optional.contains(p))
            .all(|p| given.contains(&p.as_str()))
    }
}

/// Parse the text of an `<action>` block; where several readings fit, the earliest closing quote wins.
///
/// ```
/// use serde_json::json;
/// use tagloop::protocol::parse_action;
///
/// let call = parse_action(r#"write_file(path="a.html", content="<div class="x">hi</div>")"#).unwrap();
/// assert_eq!(call.tool, "write_file");
/// assert_eq!(call.args[1].value, json!("<div class=\"x\">hi</div>"));
///
/// let err = parse_action("read_file(start_line=1 2)").unwrap_err();
/// assert_eq!(err.to_string(), "expected `,` or `)` after the value of `start_line` at offset 23");
/// ```
pub fn parse_action(text: &str) -> Result<Call, ActionError> {
    parse_action_with(text, &|_| true)
}

/// Parse the text of an `<action>` block, taking the earliest reading that `accept` agrees to
/// (for example: one that binds to the tool's signature). When no reading is accepted, the
/// earliest reading that parses is returned (binding will then explain what is wrong).
///
/// ```
/// use serde_json::json;
/// use tagloop::protocol::{parse_action, parse_action_with, Signature};
///
/// let text = r#"write_file(path="a.html", content="<a href="x", title="y">z</a>")"#;
/// // Without a signature the earliest close wins: three arguments.
/// assert_eq!(parse_action(text).unwrap().args.len(), 3);
/// // With one, the earliest reading that binds wins.
/// let sig = Signature::parse("write_file(path, content)").unwrap();
/// let call = parse_action_with(text, &|c| sig.accepts(c)).unwrap();
/// assert_eq!(call.args[1].value, json!(r#"<a href="x", title="y">z</a>"#));
/// ```
pub fn parse_action_with(text: &str, accept: &dyn Fn(&Call) -> bool) -> Result<Call, ActionError> {
    let (region, mut warnings) = strip_markdown(text);
    let base = region.as_ptr() as usize - text.as_ptr() as usize;
    let mut fuel = FUEL_PER_BYTE
        .saturating_mul(region.len())
        .saturating_add(FUEL_FIXED);

    // Python-style calls never put a positional argument after a named one: prefer readings
    // that do not (falling back to the earliest reading when none is accepted).
    let accept = |c: &Call| ordered(c) && accept(c);
    let accept: &dyn Fn(&Call) -> bool = &accept;
    let strict = search(region, false, accept, &mut fuel);
    let outcome = match strict {
        Search::Accepted(call) | Search::Parsed(call) => Ok(call),
        Search::Failed(strict_err) if !loose_can_differ(region) => Err(strict_err),
        Search::Failed(strict_err) => {
            fuel = fuel.max(region.len().saturating_add(1));
            match search(region, true, accept, &mut fuel) {
                Search::Accepted(call) | Search::Parsed(call) => Ok(call),
                Search::Failed(_) => Err(strict_err),
            }
        }
    };
    match outcome {
        Ok(mut call) => {
            warnings.append(&mut call.warnings);
            call.warnings = warnings;
            Ok(call)
        }
        Err(e) => Err(e.into_action_error(region, base)),
    }
}

/// Loose mode only adds readings where `)` is followed by more text; without such a `)` it would
/// repeat the strict search for nothing.
fn loose_can_differ(region: &str) -> bool {
    let end = region
        .trim_end_matches(|c: char| c.is_ascii_whitespace())
        .len();
    memchr::memchr(b')', &region.as_bytes()[..end]).is_some_and(|first| first + 1 < end)
}

/// No positional argument after a named one.
fn ordered(c: &Call) -> bool {
    let first_named = c.args.iter().position(|a| a.name.is_some());
    first_named.is_none_or(|i| c.args[i..].iter().all(|a| a.name.is_some()))
}

/// Fuel: bytes the whole search may parse (each attempt costs at least the input's length), per
/// input byte plus a constant: small actions get up to [`MAX_ATTEMPTS`], multi-MiB ones a few.
const FUEL_PER_BYTE: usize = 3;
const FUEL_FIXED: usize = 256 * 1024;
/// At most this many choice vectors are tried.
const MAX_ATTEMPTS: usize = 64;
/// Arrays and objects deeper than this are an error.
pub const MAX_DEPTH: usize = 128;
/// An argument name longer than this is not looked for when deciding where a string closes.
const MAX_LOOKAHEAD_IDENT: usize = 128;

enum Search {
    Accepted(Call),
    Parsed(Call),
    Failed(PErr),
}

/// Enumerate choice vectors earliest-first until a parse is accepted or fuel runs out.
fn search(region: &str, loose: bool, accept: &dyn Fn(&Call) -> bool, fuel: &mut usize) -> Search {
    let mut choices: Vec<u32> = Vec::new();
    let mut first_ok: Option<Call> = None;
    let mut best: Option<PErr> = None;
    for _attempt in 0..MAX_ATTEMPTS {
        let ctx = Ctx {
            region,
            loose,
            choices: &choices,
            met: Cell::new(0),
            exhausted_at: Cell::new(None),
            warnings: RefCell::new(Vec::new()),
            scanned: Cell::new(0),
        };
        let res = ctx.call(region);
        let met = ctx.met.get();
        let exhausted_at = ctx.exhausted_at.get();
        *fuel = fuel.saturating_sub(ctx.scanned.get().max(region.len()).max(1));
        match res {
            Ok((_, (tool, args))) => {
                let call = Call {
                    tool,
                    args,
                    warnings: ctx.warnings.take(),
                };
                if accept(&call) {
                    return Search::Accepted(call);
                }
                first_ok.get_or_insert(call);
            }
            Err(nom::Err::Error(e) | nom::Err::Failure(e)) => {
                if !e.exhausted {
                    best = Some(match best {
                        Some(b) => b.or(e),
                        None => e,
                    });
                }
            }
            Err(nom::Err::Incomplete(_)) => {}
        }
        // Next choice vector: bump the last string met (or drop the exhausted one and bump the one before).
        let n = exhausted_at.unwrap_or(met);
        if n == 0 || *fuel == 0 {
            break;
        }
        choices.resize(n, 0);
        if let Some(last) = choices.last_mut() {
            *last += 1;
        }
    }
    match (first_ok, best) {
        (Some(call), _) => Search::Parsed(call),
        (None, Some(e)) => Search::Failed(e),
        (None, None) => Search::Failed(PErr::at(region, Exp::ACTION, ECtx::None)),
    }
}

/// Remove one layer of markdown around the whole call (SPEC §1.1.9).
fn strip_markdown(text: &str) -> (&str, Vec<String>) {
    let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let mut warnings = Vec::new();
    if let Some(rest) = t.strip_prefix("```")
        && let Some(nl) = rest.find('\n')
        && !rest[..nl].trim().contains(char::is_whitespace)
        && let Some(inner) = rest[nl..].strip_suffix("```")
    {
        warnings.push("markdown code fence around the call removed".to_string());
        return (
            inner.trim_matches(|c: char| c.is_ascii_whitespace()),
            warnings,
        );
    }
    if t.len() >= 3
        && !t.starts_with("``")
        && let Some(inner) = t.strip_prefix('`').and_then(|r| r.strip_suffix('`'))
        && !inner.contains('`')
    {
        warnings.push("backticks around the call removed".to_string());
        return (
            inner.trim_matches(|c: char| c.is_ascii_whitespace()),
            warnings,
        );
    }
    (t, warnings)
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// What the parser expected, as a bit set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Exp(u16);

impl Exp {
    const ACTION: Exp = Exp(1);
    const LPAREN: Exp = Exp(1 << 1);
    const RPAREN: Exp = Exp(1 << 2);
    const COMMA: Exp = Exp(1 << 3);
    const ARG: Exp = Exp(1 << 4);
    const VALUE: Exp = Exp(1 << 5);
    const RBRACKET: Exp = Exp(1 << 6);
    const RBRACE: Exp = Exp(1 << 7);
    const COLON: Exp = Exp(1 << 8);
    const KEY: Exp = Exp(1 << 9);
    const END: Exp = Exp(1 << 10);
    const CLOSE_QUOTE: Exp = Exp(1 << 11);
    const DEPTH: Exp = Exp(1 << 12);
    const NUMBER: Exp = Exp(1 << 13);

    fn words(self) -> Vec<&'static str> {
        let all: [(Exp, &str); 14] = [
            (Exp::ACTION, "a tool call like `search(query=\"…\")`"),
            (Exp::LPAREN, "`(`"),
            (Exp::ARG, "an argument (`name=value` or a value)"),
            (
                Exp::VALUE,
                "a value (a string in quotes, a number, true, false, null, a list or an object)",
            ),
            (Exp::KEY, "an object key"),
            (Exp::COLON, "`:`"),
            (Exp::COMMA, "`,`"),
            (Exp::RPAREN, "`)`"),
            (Exp::RBRACKET, "`]`"),
            (Exp::RBRACE, "`}`"),
            (Exp::END, "the end of the action"),
            (Exp::CLOSE_QUOTE, "a closing quote"),
            (Exp::DEPTH, "at most 128 levels of nested lists and objects"),
            (Exp::NUMBER, "a number without `_`"),
        ];
        all.iter()
            .filter(|(e, _)| self.0 & e.0 != 0)
            .map(|&(_, w)| w)
            .collect()
    }
}

/// Where the parser was, for the message: addresses are pointers into the region (compared and
/// converted to offsets at the end; never dereferenced).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ECtx {
    None,
    /// After the tool name (address, length).
    AfterTool(usize, usize),
    /// The value of an argument (name address, length) or of positional argument n.
    ValueOf(Option<(usize, usize)>, usize),
    /// After the value of an argument.
    AfterValue(Option<(usize, usize)>, usize),
    /// Inside a list.
    InList,
    /// Inside an object.
    InObject,
    /// After the closing `)`.
    AfterCall,
    /// A string that started at this address was never closed.
    OpenString(usize, Option<(usize, usize)>, usize),
}

/// The parse error: the furthest address reached and what was expected there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PErr {
    /// Address of the remaining input (further = larger).
    at: usize,
    expected: Exp,
    ctx: ECtx,
    /// A string had no k-th candidate close: this choice vector is used up (not a real error).
    exhausted: bool,
}

impl PErr {
    fn at(i: &str, expected: Exp, ctx: ECtx) -> PErr {
        PErr {
            at: i.as_ptr() as usize,
            expected,
            ctx,
            exhausted: false,
        }
    }

    fn into_action_error(self, region: &str, base: usize) -> ActionError {
        let start = region.as_ptr() as usize;
        let off = |addr: usize| addr.saturating_sub(start).min(region.len());
        let name = |n: Option<(usize, usize)>, idx: usize| match n {
            Some((a, l)) => {
                let o = off(a);
                let s = region.get(o..o + l).unwrap_or("?");
                format!("`{s}`")
            }
            None => format!("argument {}", idx + 1),
        };
        let words = self.expected.words();
        let list = match words.as_slice() {
            [] => "something else".to_string(),
            [one] => (*one).to_string(),
            [init @ .., last] => format!("{} or {}", init.join(", "), last),
        };
        let mut open_string = false;
        let message = match self.ctx {
            ECtx::None => format!("expected {list}"),
            ECtx::AfterTool(a, l) => {
                let o = off(a);
                format!(
                    "expected {list} after the tool name `{}`",
                    region.get(o..o + l).unwrap_or("?")
                )
            }
            ECtx::ValueOf(n, i) => format!("expected {list} for {}", name(n, i)),
            ECtx::AfterValue(n, i) => format!("expected {list} after the value of {}", name(n, i)),
            ECtx::InList => format!("expected {list} in the list"),
            ECtx::InObject => format!("expected {list} in the object"),
            ECtx::AfterCall => format!("expected {list} after the closing `)` of the call"),
            ECtx::OpenString(a, n, i) => {
                open_string = true;
                let o = off(a);
                let q = region.get(o..o + 1).unwrap_or("\"");
                format!(
                    "the string for {} that starts at offset {} is never closed: expected a closing {}{}{}",
                    name(n, i),
                    base + o,
                    if q == "'" { "`'`" } else { "`\"`" },
                    ", then `,` and the next argument",
                    " or `)`"
                )
            }
        };
        let mut message = message;
        let here = &region[off(self.at)..];
        if self.expected.0 & Exp::VALUE.0 != 0
            && let Ok((_, word)) = ident(here)
            && keyword(here).is_err()
        {
            message.push_str(&format!(
                "; found the bare word `{word}`: text must be in quotes"
            ));
        }
        ActionError {
            message,
            offset: base + off(self.at),
            open_string,
        }
    }
}

impl<'a> ParseError<&'a str> for PErr {
    fn from_error_kind(input: &'a str, _kind: ErrorKind) -> Self {
        PErr::at(input, Exp(0), ECtx::None)
    }

    fn append(_input: &'a str, _kind: ErrorKind, other: Self) -> Self {
        other
    }

    /// Keep the error that got furthest; on a tie, merge what was expected.
    fn or(self, other: Self) -> Self {
        if self.exhausted != other.exhausted {
            return if self.exhausted { other } else { self };
        }
        match self.at.cmp(&other.at) {
            std::cmp::Ordering::Greater => self,
            std::cmp::Ordering::Less => other,
            std::cmp::Ordering::Equal => PErr {
                expected: Exp(self.expected.0 | other.expected.0),
                ctx: if self.ctx == ECtx::None {
                    other.ctx
                } else {
                    self.ctx
                },
                ..self
            },
        }
    }
}

type Res<'a, T> = IResult<&'a str, T, PErr>;

/// Replace whatever error a nom primitive gave with a positioned, described one.
fn expect<'a, T>(r: Res<'a, T>, i: &'a str, exp: Exp, ctx: ECtx) -> Res<'a, T> {
    r.map_err(|e| e.map(|_| PErr::at(i, exp, ctx)))
}

fn fail<'a, T>(i: &'a str, exp: Exp, ctx: ECtx) -> Res<'a, T> {
    Err(nom::Err::Error(PErr::at(i, exp, ctx)))
}

// ---------------------------------------------------------------------------------------------
// Lexical pieces (nom)
// ---------------------------------------------------------------------------------------------

fn ws(i: &str) -> Res<'_, &str> {
    take_while(|c: char| c.is_ascii_whitespace())(i)
}

fn is_id_start(c: char) -> bool {
    c == '_' || unicode_ident::is_xid_start(c)
}

fn is_id_continue(c: char) -> bool {
    unicode_ident::is_xid_continue(c)
}

/// `ident := (XID_Start | "_") XID_Continue*`
fn ident(i: &str) -> Res<'_, &str> {
    recognize((
        nom::character::complete::satisfy(is_id_start),
        take_while(is_id_continue),
    ))
    .parse(i)
}

/// `tool := ident ( ("." | "-") ident_continue+ )*`
fn tool_ident(i: &str) -> Res<'_, &str> {
    recognize((
        ident,
        nom::multi::many0_count((one_of(".-"), take_while1(is_id_continue))),
    ))
    .parse(i)
}

fn keyword(i: &str) -> Res<'_, Value> {
    // Most values are not keywords: decide from the first byte before trying six tags.
    if !matches!(
        i.as_bytes().first(),
        Some(b't' | b'f' | b'n' | b'T' | b'F' | b'N')
    ) {
        return Err(nom::Err::Error(PErr::from_error_kind(i, ErrorKind::Tag)));
    }
    let (rest, word) = alt((
        tag("true"),
        tag("false"),
        tag("null"),
        tag("True"),
        tag("False"),
        tag("None"),
    ))
    .parse(i)?;
    let (rest, _) = not(peek(nom::character::complete::satisfy(is_id_continue))).parse(rest)?;
    let v = match word {
        "true" | "True" => Value::Bool(true),
        "false" | "False" => Value::Bool(false),
        _ => Value::Null,
    };
    Ok((rest, v))
}

/// A JSON-like number; `123_456` is not one (the boundary check refuses `_`).
fn number(i: &str) -> Res<'_, Value> {
    let (rest, text) = recognize((
        opt(one_of("+-")),
        digit1,
        opt((char('.'), digit1)),
        opt((one_of("eE"), opt(one_of("+-")), digit1)),
    ))
    .parse(i)?;
    if rest.starts_with(|c: char| is_id_continue(c) || c == '.') {
        return Err(nom::Err::Failure(PErr::at(rest, Exp::NUMBER, ECtx::None)));
    }
    let t = text.strip_prefix('+').unwrap_or(text);
    let is_int = !t.contains(['.', 'e', 'E']);
    let n = if is_int {
        t.parse::<i64>()
            .map(Number::from)
            .or_else(|_| t.parse::<u64>().map(Number::from))
            .ok()
    } else {
        None
    };
    let n = match n {
        Some(n) => n,
        None => match t.parse::<f64>().ok().and_then(Number::from_f64) {
            Some(n) => n,
            None => return Err(nom::Err::Failure(PErr::at(i, Exp::NUMBER, ECtx::None))),
        },
    };
    Ok((rest, Value::Number(n)))
}

/// Is `b[q..]` the start of a value (for the quote-closing lookahead)?
fn value_start(s: &str, q: usize) -> bool {
    match s.as_bytes().get(q) {
        Some(b'"' | b'\'' | b'[' | b'{' | b'-' | b'+' | b'0'..=b'9') => true,
        Some(_) => keyword(&s[q..]).is_ok(),
        None => false,
    }
}

/// Is `s[q..]` `ident ws* (= | :)` (a named argument)?
fn named_arg_start(s: &str, q: usize) -> bool {
    let mut chars = s[q..].char_indices();
    match chars.next() {
        Some((_, c)) if is_id_start(c) => {}
        _ => return false,
    }
    let mut end = s.len() - q;
    for (k, c) in chars {
        if k > MAX_LOOKAHEAD_IDENT {
            return false;
        }
        if !is_id_continue(c) {
            end = k;
            break;
        }
    }
    let b = s.as_bytes();
    let p = skip_ws(b, q + end);
    match b.get(p) {
        Some(b'=') => b.get(p + 1) != Some(&b'='),
        Some(b':') => true,
        _ => false,
    }
}

fn skip_ws(b: &[u8], mut p: usize) -> usize {
    while p < b.len() && b[p].is_ascii_whitespace() {
        p += 1;
    }
    p
}

/// Where a string sits, which decides where it may close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Arg,
    ListItem,
    ObjKey,
    ObjValue,
}

fn unescape(s: &str) -> String {
    let Some(first) = memchr::memchr(b'\\', s.as_bytes()) else {
        return s.to_string();
    };
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let mut cut = first;
    loop {
        out.push_str(&rest[..cut]);
        rest = &rest[cut..];
        // `rest` starts with a backslash: decode the escape.
        let used = unescape_one(rest, &mut out);
        rest = &rest[used..];
        match memchr::memchr(b'\\', rest.as_bytes()) {
            Some(n) => cut = n,
            None => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

/// Decode the escape at the start of `s` (which starts with `\\`) into `out`; returns bytes used.
fn unescape_one(s: &str, out: &mut String) -> usize {
    let mut chars = s[1..].chars();
    let Some(e) = chars.next() else {
        out.push('\\');
        return 1;
    };
    match e {
        'n' => out.push('\n'),
        't' => out.push('\t'),
        'r' => out.push('\r'),
        '0' => out.push('\0'),
        '\\' | '"' | '\'' => out.push(e),
        'u' => {
            let hex = |at: usize| -> Option<u32> {
                let h = s.get(at..at + 4)?;
                if h.bytes().all(|b| b.is_ascii_hexdigit()) {
                    u32::from_str_radix(h, 16).ok()
                } else {
                    None
                }
            };
            match hex(2) {
                Some(hi @ 0xD800..=0xDBFF) => {
                    let lo = if s.get(6..8) == Some("\\u") {
                        hex(8).filter(|lo| (0xDC00..=0xDFFF).contains(lo))
                    } else {
                        None
                    };
                    if let Some(ch) = lo.and_then(|lo| {
                        char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                    }) {
                        out.push(ch);
                        return 12;
                    }
                    out.push_str("\\u");
                }
                Some(v) => match char::from_u32(v) {
                    Some(ch) => {
                        out.push(ch);
                        return 6;
                    }
                    None => out.push_str("\\u"),
                },
                None => out.push_str("\\u"),
            }
        }
        other => {
            out.push('\\');
            out.push(other);
        }
    }
    1 + e.len_utf8()
}

// ---------------------------------------------------------------------------------------------
// The parser for one choice vector
// ---------------------------------------------------------------------------------------------

struct Ctx<'r, 'c> {
    region: &'r str,
    loose: bool,
    choices: &'c [u32],
    met: Cell<usize>,
    exhausted_at: Cell<Option<usize>>,
    warnings: RefCell<Vec<String>>,
    scanned: Cell<usize>,
}

type Named<'a> = Option<&'a str>;

fn addr(s: &str) -> (usize, usize) {
    (s.as_ptr() as usize, s.len())
}

impl<'r> Ctx<'r, '_> {
    /// `action := ws tool ws "(" ws [ arg ( ws "," ws arg )* ws [","] ] ws ")" ws`
    fn call(&self, i: &'r str) -> Res<'r, (String, Vec<Arg>)> {
        let (i, _) = ws(i)?;
        let (i, tool) = self.tool_name(i)?;
        let after_tool = ECtx::AfterTool(addr(tool).0, tool.len());
        let (i, _) = ws(i)?;
        let (i, _) = expect(char('(').parse(i), i, Exp::LPAREN, after_tool)?;
        let (mut i, _) = ws(i)?;
        let mut args: Vec<Arg> = Vec::new();
        if let Ok((r, _)) = char::<&str, PErr>(')').parse(i) {
            i = r;
        } else {
            loop {
                let idx = args.len();
                let (r, (name, value)) = self.arg(i, idx)?;
                args.push(Arg {
                    name: name.map(str::to_string),
                    value,
                });
                let (r, _) = ws(r)?;
                let after = ECtx::AfterValue(name.map(addr), idx);
                let (r, sep) = expect(one_of(",)").parse(r), r, Exp::COMMA | Exp::RPAREN, after)?;
                if sep == ')' {
                    i = r;
                    break;
                }
                let (r, _) = ws(r)?;
                if let Ok((r, _)) = char::<&str, PErr>(')').parse(r) {
                    i = r;
                    break;
                }
                if r.is_empty() {
                    return fail(r, Exp::ARG | Exp::RPAREN, after);
                }
                i = r;
            }
        }
        let (i, _) = ws(i)?;
        if !i.is_empty() {
            if self.loose {
                let junk: String = i.chars().take(40).collect();
                self.warnings
                    .borrow_mut()
                    .push(format!("text after the call ignored: {junk:?}"));
                return Ok(("", (tool.to_string(), args)));
            }
            return fail(i, Exp::END, ECtx::AfterCall);
        }
        Ok((i, (tool.to_string(), args)))
    }

    /// The tool name, with one layer of markdown (`**search**`, `` `search` ``) allowed around it.
    fn tool_name(&self, i: &'r str) -> Res<'r, &'r str> {
        for wrap in ["**", "`", "*", "__"] {
            if let Some(r) = i.strip_prefix(wrap)
                && let Ok((r2, name)) = tool_ident(r)
                && let Some(r3) = r2.strip_prefix(wrap)
            {
                self.warnings
                    .borrow_mut()
                    .push("markdown around the tool name removed".to_string());
                return Ok((r3, name));
            }
        }
        expect(tool_ident(i), i, Exp::ACTION, ECtx::None)
    }

    /// `arg := argname ws ("=" | ":") ws value | value`
    fn arg(&self, i: &'r str, idx: usize) -> Res<'r, (Named<'r>, Value)> {
        let named: Res<'r, (&str, &str, char)> = (ident, ws, one_of("=:")).parse(i);
        if let Ok((r, (name, _, _))) = named
            && keyword(name).is_err()
        {
            let (r, _) = ws(r)?;
            let (r, v) = self.value(r, 0, Place::Arg, ECtx::ValueOf(Some(addr(name)), idx))?;
            return Ok((r, (Some(name), v)));
        }
        let (r, v) = self.value(i, 0, Place::Arg, ECtx::ValueOf(None, idx))?;
        Ok((r, (None, v)))
    }

    fn value(&self, i: &'r str, depth: usize, place: Place, ctx: ECtx) -> Res<'r, Value> {
        match i.as_bytes().first() {
            Some(b'"' | b'\'') => self.string(i, place, ctx),
            Some(b'[') => self.array(i, depth + 1),
            Some(b'{') => self.object(i, depth + 1),
            Some(b'-' | b'+' | b'0'..=b'9') => match number(i) {
                Ok(ok) => Ok(ok),
                // Keep the number's own, more precise error (`123_456`).
                Err(nom::Err::Failure(f)) => Err(nom::Err::Failure(PErr { ctx, ..f })),
                Err(_) => fail(i, Exp::VALUE, ctx),
            },
            _ => expect(keyword(i), i, Exp::VALUE, ctx),
        }
    }

    fn array(&self, i: &'r str, depth: usize) -> Res<'r, Value> {
        if depth > MAX_DEPTH {
            return Err(nom::Err::Failure(PErr::at(i, Exp::DEPTH, ECtx::InList)));
        }
        let (i, _) = char('[').parse(i)?;
        let (mut i, _) = ws(i)?;
        let mut items = Vec::new();
        if let Ok((r, _)) = char::<&str, PErr>(']').parse(i) {
            return Ok((r, Value::Array(items)));
        }
        loop {
            let (r, v) = self.value(i, depth, Place::ListItem, ECtx::InList)?;
            items.push(v);
            let (r, _) = ws(r)?;
            let (r, sep) = expect(
                one_of(",]").parse(r),
                r,
                Exp::COMMA | Exp::RBRACKET,
                ECtx::InList,
            )?;
            if sep == ']' {
                return Ok((r, Value::Array(items)));
            }
            let (r, _) = ws(r)?;
            if let Ok((r, _)) = char::<&str, PErr>(']').parse(r) {
                return Ok((r, Value::Array(items)));
            }
            i = r;
        }
    }

    fn object(&self, i: &'r str, depth: usize) -> Res<'r, Value> {
        if depth > MAX_DEPTH {
            return Err(nom::Err::Failure(PErr::at(i, Exp::DEPTH, ECtx::InObject)));
        }
        let (i, _) = char('{').parse(i)?;
        let (mut i, _) = ws(i)?;
        let mut map = Map::new();
        if let Ok((r, _)) = char::<&str, PErr>('}').parse(i) {
            return Ok((r, Value::Object(map)));
        }
        loop {
            let (r, key) = match i.as_bytes().first() {
                Some(b'"' | b'\'') => {
                    let (r, k) = self.string(i, Place::ObjKey, ECtx::InObject)?;
                    (r, k.as_str().unwrap_or_default().to_string())
                }
                _ => {
                    let (r, k) = expect(ident(i), i, Exp::KEY | Exp::RBRACE, ECtx::InObject)?;
                    (r, k.to_string())
                }
            };
            let (r, _) = ws(r)?;
            let (r, _) = expect(char(':').parse(r), r, Exp::COLON, ECtx::InObject)?;
            let (r, _) = ws(r)?;
            let (r, v) = self.value(r, depth, Place::ObjValue, ECtx::InObject)?;
            map.insert(key, v);
            let (r, _) = ws(r)?;
            let (r, sep) = expect(
                one_of(",}").parse(r),
                r,
                Exp::COMMA | Exp::RBRACE,
                ECtx::InObject,
            )?;
            if sep == '}' {
                return Ok((r, Value::Object(map)));
            }
            let (r, _) = ws(r)?;
            if let Ok((r, _)) = char::<&str, PErr>('}').parse(r) {
                return Ok((r, Value::Object(map)));
            }
            i = r;
        }
    }

    /// Can the action go on after a closing quote that ends at `p` (an index into the region)?
    fn can_go_on(&self, p: usize, place: Place) -> bool {
        let s = self.region;
        let b = s.as_bytes();
        let p = skip_ws(b, p);
        match (place, b.get(p)) {
            (Place::Arg, Some(b',')) => {
                let q = skip_ws(b, p + 1);
                b.get(q) == Some(&b')') || value_start(s, q) || named_arg_start(s, q)
            }
            (Place::Arg, Some(b')')) => self.loose || skip_ws(b, p + 1) == b.len(),
            (Place::ListItem, Some(b',')) => {
                let q = skip_ws(b, p + 1);
                b.get(q) == Some(&b']') || value_start(s, q)
            }
            (Place::ListItem, Some(b']')) => true,
            (Place::ObjKey, Some(b':')) => true,
            (Place::ObjValue, Some(b',')) => {
                let q = skip_ws(b, p + 1);
                matches!(b.get(q), Some(b'}' | b'"' | b'\'')) || s[q..].starts_with(is_id_start)
            }
            (Place::ObjValue, Some(b'}')) => true,
            _ => false,
        }
    }

    /// A quoted string. Candidate closes are quotes after which the action can go on; this string
    /// takes the k-th candidate, k from the choice vector.
    fn string(&self, i: &'r str, place: Place, ctx: ECtx) -> Res<'r, Value> {
        let index = self.met.get();
        self.met.set(index + 1);
        let want = self.choices.get(index).copied().unwrap_or(0);
        let region = self.region;
        let start = region.len() - i.len();
        let b = region.as_bytes();
        let raw = i.starts_with("\"\"\"");
        let q = b[start];
        let open_len = if raw { 3 } else { 1 };
        let mut j = start + open_len;
        let mut k = 0u32;
        let found = loop {
            // A backslash as the last byte steps `j` past the end.
            let Some(rest) = b.get(j..) else {
                break None;
            };
            let hit = if raw {
                memchr::memchr(q, rest).map(|r| (j + r, q))
            } else {
                memchr::memchr2(q, b'\\', rest).map(|r| (j + r, b[j + r]))
            };
            let Some((c, byte)) = hit else {
                break None;
            };
            if byte == b'\\' {
                j = c + 2;
                continue;
            }
            let close_len = if raw { 3 } else { 1 };
            if (!raw || b[c..].starts_with(b"\"\"\"")) && self.can_go_on(c + close_len, place) {
                if k == want {
                    break Some((c, close_len));
                }
                k += 1;
            }
            j = c + 1;
        };
        self.scanned
            .set(self.scanned.get() + found.map_or(b.len(), |(c, _)| c).saturating_sub(start));
        match found {
            Some((c, close_len)) => {
                let body = &region[start + open_len..c];
                let v = if raw {
                    body.to_string()
                } else {
                    unescape(body)
                };
                Ok((&region[c + close_len..], Value::String(v)))
            }
            None => {
                self.exhausted_at.set(Some(index));
                let (name, idx) = match ctx {
                    ECtx::ValueOf(n, idx) => (n, idx),
                    _ => (None, 0),
                };
                let mut e = PErr::at(
                    &region[region.len()..],
                    Exp::CLOSE_QUOTE,
                    ECtx::OpenString(i.as_ptr() as usize, name, idx),
                );
                e.exhausted = want > 0;
                Err(nom::Err::Failure(e))
            }
        }
    }
}

impl std::ops::BitOr for Exp {
    type Output = Exp;
    fn bitor(self, o: Exp) -> Exp {
        Exp(self.0 | o.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn escapes() {
        assert_eq!(unescape(r"a\nb\t\\\x"), "a\nb\t\\\\x");
        assert_eq!(unescape(r"\ud83d\ude00"), "😀");
        assert_eq!(unescape(r"\ud83d"), r"\ud83d");
        assert_eq!(unescape(r"\u4e2d"), "中");
        assert_eq!(unescape("\\"), "\\");
    }

    #[test]
    fn basic() {
        let c = parse_action(r#"f(a=1, b="x", c=[1, {k: 'v'}], d=None,)"#).unwrap();
        assert_eq!(c.tool, "f");
        assert_eq!(c.args.len(), 4);
        assert_eq!(c.args[2].value, json!([1, {"k": "v"}]));
    }
}
