//! Lexical pieces: white space, identifiers and tool names, keywords, numbers, and the escapes
//! and lookaheads that decide where a string may close.

use super::error::{ECtx, Exp, PErr, Res};

use nom::{
    Parser,
    branch::alt,
    bytes::complete::{tag, take_while, take_while1},
    character::complete::{char, digit1, one_of},
    combinator::{not, opt, peek, recognize},
    error::{ErrorKind, ParseError},
};
use serde_json::{Number, Value};

/// An argument name longer than this is not looked for when deciding where a string closes.
pub(super) const MAX_LOOKAHEAD_IDENT: usize = 128;

pub(super) fn ws(i: &str) -> Res<'_, &str> {
    take_while(|c: char| c.is_ascii_whitespace())(i)
}

pub(super) fn is_id_start(c: char) -> bool {
    c == '_' || unicode_ident::is_xid_start(c)
}

pub(super) fn is_id_continue(c: char) -> bool {
    unicode_ident::is_xid_continue(c)
}

/// `ident := (XID_Start | "_") XID_Continue*`
pub(super) fn ident(i: &str) -> Res<'_, &str> {
    recognize((
        nom::character::complete::satisfy(is_id_start),
        take_while(is_id_continue),
    ))
    .parse(i)
}

/// `tool := ident ( ("." | "-") ident_continue+ )*`
pub(super) fn tool_ident(i: &str) -> Res<'_, &str> {
    recognize((
        ident,
        nom::multi::many0_count((one_of(".-"), take_while1(is_id_continue))),
    ))
    .parse(i)
}

pub(super) fn keyword(i: &str) -> Res<'_, Value> {
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
pub(super) fn number(i: &str) -> Res<'_, Value> {
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
pub(super) fn value_start(s: &str, q: usize) -> bool {
    match s.as_bytes().get(q) {
        Some(b'"' | b'\'' | b'[' | b'{' | b'-' | b'+' | b'0'..=b'9') => true,
        Some(_) => keyword(&s[q..]).is_ok(),
        None => false,
    }
}

/// Is `s[q..]` `ident ws* (= | :)` (a named argument)?
pub(super) fn named_arg_start(s: &str, q: usize) -> bool {
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

pub(super) fn skip_ws(b: &[u8], mut p: usize) -> usize {
    while p < b.len() && b[p].is_ascii_whitespace() {
        p += 1;
    }
    p
}

/// Where a string sits, which decides where it may close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    Arg,
    ListItem,
    ObjKey,
    ObjValue,
}

pub(super) fn unescape(s: &str) -> String {
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
pub(super) fn unescape_one(s: &str, out: &mut String) -> usize {
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
