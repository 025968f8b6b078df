//! The action grammar's errors: [`ActionError`] and [`SignatureError`], and the parse error model
//! behind the first: the furthest point reached, what was expected there (a bit set merged across
//! branches), and where the parser was, turned into one message and an offset.

use nom::{
    IResult,
    error::{ErrorKind, ParseError},
};

/// Why an action did not parse: the furthest point reached and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[error("{message} at offset {offset}")]
#[non_exhaustive]
pub struct ActionError {
    /// What was expected, in words a model can act on.
    pub message: String,
    /// Byte offset into the action text.
    pub offset: usize,
    /// True when the text ended inside a string that was never closed (a stop string may have cut
    /// it: the runtime then lets the model continue the same turn).
    pub open_string: bool,
    /// Where the string that was never closed begins (the byte offset of its opening quote in
    /// the action text), when the error is one.
    pub string_start: Option<usize>,
}

/// A tool signature that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad tool signature `{text}`: {reason} (expected something like `write_file(path, content)`)"
)]
#[non_exhaustive]
pub struct SignatureError {
    /// The text passed to [`Signature::parse`](crate::Signature::parse), untrimmed.
    pub text: String,
    /// What was wrong.
    pub reason: String,
}

/// What the parser expected, as a bit set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Exp(u16);

impl Exp {
    pub(super) const ACTION: Exp = Exp(1);
    pub(super) const LPAREN: Exp = Exp(1 << 1);
    pub(super) const RPAREN: Exp = Exp(1 << 2);
    pub(super) const COMMA: Exp = Exp(1 << 3);
    pub(super) const ARG: Exp = Exp(1 << 4);
    pub(super) const VALUE: Exp = Exp(1 << 5);
    pub(super) const RBRACKET: Exp = Exp(1 << 6);
    pub(super) const RBRACE: Exp = Exp(1 << 7);
    pub(super) const COLON: Exp = Exp(1 << 8);
    pub(super) const KEY: Exp = Exp(1 << 9);
    pub(super) const END: Exp = Exp(1 << 10);
    pub(super) const CLOSE_QUOTE: Exp = Exp(1 << 11);
    pub(super) const DEPTH: Exp = Exp(1 << 12);
    pub(super) const NUMBER: Exp = Exp(1 << 13);

    pub(super) fn words(self) -> Vec<&'static str> {
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
pub(super) enum ECtx {
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
pub(crate) struct PErr {
    /// Address of the remaining input (further = larger).
    pub(super) at: usize,
    pub(super) expected: Exp,
    pub(super) ctx: ECtx,
    /// A string had no k-th candidate close: this choice vector is used up (not a real error).
    pub(super) exhausted: bool,
    /// The reading took a quote that only the end of the action follows as a string's close:
    /// the message names what is missing after it, but the text may as well have been cut
    /// inside that string, so [`ActionError::open_string`] stays true.
    pub(super) maybe_open: bool,
}

impl PErr {
    pub(super) fn at(i: &str, expected: Exp, ctx: ECtx) -> PErr {
        PErr {
            at: i.as_ptr() as usize,
            expected,
            ctx,
            exhausted: false,
            maybe_open: false,
        }
    }

    /// Whether a value was among what the parser expected here.
    pub(super) fn expects_value(&self) -> bool {
        self.expected.0 & Exp::VALUE.0 != 0
    }

    /// The error as the caller sees it: one message (what was expected, and where) and the
    /// offset in the turn (`region` starts at `base`).
    pub(super) fn into_action_error(self, region: &str, base: usize) -> ActionError {
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
        let mut string_start = None;
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
                string_start = Some(base + o);
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
        ActionError {
            message,
            offset: base + off(self.at),
            open_string: open_string || self.maybe_open,
            string_start,
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
                maybe_open: self.maybe_open || other.maybe_open,
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

pub(super) type Res<'a, T> = IResult<&'a str, T, PErr>;

/// Replace whatever error a nom primitive gave with a positioned, described one.
pub(super) fn expect<'a, T>(r: Res<'a, T>, i: &'a str, exp: Exp, ctx: ECtx) -> Res<'a, T> {
    r.map_err(|e| e.map(|_| PErr::at(i, exp, ctx)))
}

pub(super) fn fail<'a, T>(i: &'a str, exp: Exp, ctx: ECtx) -> Res<'a, T> {
    Err(nom::Err::Error(PErr::at(i, exp, ctx)))
}

impl std::ops::BitOr for Exp {
    type Output = Exp;
    fn bitor(self, o: Exp) -> Exp {
        Exp(self.0 | o.0)
    }
}
