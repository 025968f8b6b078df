//! The grammar for one choice vector: a call, its arguments, and values (strings, numbers,
//! keywords, arrays, objects), reading strings by hand where a quote may or may not close them.

use std::cell::{Cell, RefCell};

use super::Arg;
use super::error::{ECtx, Exp, PErr, Res, expect, fail};
use super::lex::{
    Place, ident, is_id_start, keyword, named_arg_start, number, skip_ws, tool_ident, unescape,
    value_start, ws,
};

use nom::{
    Parser,
    character::complete::{char, one_of},
};
use serde_json::{Map, Value};

/// Arrays and objects deeper than this are an error.
pub const MAX_DEPTH: usize = 128;

pub(super) struct Ctx<'r, 'c> {
    pub(super) region: &'r str,
    pub(super) loose: bool,
    pub(super) choices: &'c [u32],
    pub(super) met: Cell<usize>,
    pub(super) exhausted_at: Cell<Option<usize>>,
    pub(super) warnings: RefCell<Vec<String>>,
    pub(super) scanned: Cell<usize>,
    /// A string was read as closed by a quote that only the end of the action follows (the
    /// reading that `search(query="x"` forgot its `)`). The text may also have been cut inside
    /// that string, so the error stays an open-string one for the runtime ([`PErr::maybe_open`]).
    pub(super) closed_at_end: Cell<bool>,
}

pub(super) type Named<'a> = Option<&'a str>;

pub(super) fn addr(s: &str) -> (usize, usize) {
    (s.as_ptr() as usize, s.len())
}

impl<'r> Ctx<'r, '_> {
    /// `action := ws tool ws "(" ws [ arg ( ws "," ws arg )* ws [","] ] ws ")" ws`
    pub(super) fn call(&self, i: &'r str) -> Res<'r, (String, Vec<Arg>)> {
        let (i, _) = ws(i)?;
        let (i, tool) = self.tool_name(i)?;
        let after_tool = ECtx::AfterTool(addr(tool).0, tool.len());
        let (i, _) = ws(i)?;
        let (i, _) = expect(char('(').parse(i), i, Exp::LPAREN, after_tool)?;
        let more = Some(Exp::ARG | Exp::RPAREN);
        let (i, args) = self.list(i, ')', Exp::RPAREN, more, |i, idx| {
            let (r, (name, value)) = self.arg(i, idx)?;
            let name_at = name.map(addr);
            let name = name.map(str::to_string);
            Ok((r, (Arg { name, value }, ECtx::AfterValue(name_at, idx))))
        })?;
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
    pub(super) fn tool_name(&self, i: &'r str) -> Res<'r, &'r str> {
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
    pub(super) fn arg(&self, i: &'r str, idx: usize) -> Res<'r, (Named<'r>, Value)> {
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

    pub(super) fn value(
        &self,
        i: &'r str,
        depth: usize,
        place: Place,
        ctx: ECtx,
    ) -> Res<'r, Value> {
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

    /// `array := "[" [ value ("," value)* [","] ] "]"`
    pub(super) fn array(&self, i: &'r str, depth: usize) -> Res<'r, Value> {
        if depth > MAX_DEPTH {
            return Err(nom::Err::Failure(PErr::at(i, Exp::DEPTH, ECtx::InList)));
        }
        let (i, _) = char('[').parse(i)?;
        let (i, items) = self.list(i, ']', Exp::RBRACKET, None, |i, _| {
            let (r, v) = self.value(i, depth, Place::ListItem, ECtx::InList)?;
            Ok((r, (v, ECtx::InList)))
        })?;
        Ok((i, Value::Array(items)))
    }

    /// `object := "{" [ key ":" value ("," key ":" value)* [","] ] "}"`, `key := string | argname`
    pub(super) fn object(&self, i: &'r str, depth: usize) -> Res<'r, Value> {
        if depth > MAX_DEPTH {
            return Err(nom::Err::Failure(PErr::at(i, Exp::DEPTH, ECtx::InObject)));
        }
        let (i, _) = char('{').parse(i)?;
        let (i, entries) = self.list(i, '}', Exp::RBRACE, None, |i, _| {
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
            Ok((r, ((key, v), ECtx::InObject)))
        })?;
        let mut map = Map::new();
        for (key, v) in entries {
            map.insert(key, v);
        }
        Ok((i, Value::Object(map)))
    }

    /// The one list shape of the grammar, after its opening bracket:
    /// `ws [ item ( ws "," ws item )* ws [","] ] ws close`, for call arguments, arrays and objects
    /// alike. `item` reads one item (given its index) and says where the parser is after it, for
    /// the error when neither `,` nor `close` follows. With `more`, a `,` at the very end of the
    /// input is an error expecting `more` (a call cut off after a comma).
    fn list<T>(
        &self,
        i: &'r str,
        close: char,
        close_exp: Exp,
        more: Option<Exp>,
        mut item: impl FnMut(&'r str, usize) -> Res<'r, (T, ECtx)>,
    ) -> Res<'r, Vec<T>> {
        let seps = [',', close];
        let (mut i, _) = ws(i)?;
        let mut items = Vec::new();
        if let Ok((r, _)) = char::<&str, PErr>(close).parse(i) {
            return Ok((r, items));
        }
        loop {
            let (r, (v, after)) = item(i, items.len())?;
            items.push(v);
            let (r, _) = ws(r)?;
            let (r, sep) = expect(one_of(&seps[..]).parse(r), r, Exp::COMMA | close_exp, after)?;
            if sep == close {
                return Ok((r, items));
            }
            let (r, _) = ws(r)?;
            if let Ok((r, _)) = char::<&str, PErr>(close).parse(r) {
                return Ok((r, items));
            }
            if let Some(exp) = more
                && r.is_empty()
            {
                return fail(r, exp, after);
            }
            i = r;
        }
    }

    /// Can the action go on after a closing quote that ends at `p` (an index into the region)?
    pub(super) fn can_go_on(&self, p: usize, place: Place) -> bool {
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
    pub(super) fn string(&self, i: &'r str, place: Place, ctx: ECtx) -> Res<'r, Value> {
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
        // The first quote that could close the string, whether or not the action goes on
        // after it: the fallback reading when no quote fits (see below).
        let mut first_close: Option<usize> = None;
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
            let closes = !raw || b[c..].starts_with(b"\"\"\"");
            if closes && first_close.is_none() {
                first_close = Some(c);
            }
            if closes && self.can_go_on(c + close_len, place) {
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
            None if want == 0
                && first_close.is_some_and(|c| skip_ws(b, c + open_len) == b.len()) =>
            {
                // No quote fits, but the first one ends the action: read the string as closed
                // there, so the parse fails on what really is missing after it (`)`, `]`, `}`
                // or `:`) instead of calling a closed string unclosed. It cannot succeed: the
                // action ends right after this value.
                let c = first_close.unwrap_or(start);
                self.closed_at_end.set(true);
                let body = &region[start + open_len..c];
                let v = if raw {
                    body.to_string()
                } else {
                    unescape(body)
                };
                Ok((&region[c + open_len..], Value::String(v)))
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
