//! The action grammar (docs/protocol.md §1.2), written with nom 8.
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

mod call;
mod error;
mod grammar;
mod lex;
mod search;
#[cfg(test)]
mod tests;

use serde_json::Value;

pub use call::{Arg, Call};
pub use error::{ActionError, SignatureError};
pub use grammar::MAX_DEPTH;
use lex::{ident, tool_ident};
use search::{
    FUEL_FIXED, FUEL_PER_BYTE, Search, loose_can_differ, ordered, search, strip_markdown,
};

/// A tool signature for quote disambiguation: `write_file(path, content)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// The tool name; [`accepts`](Self::accepts) judges only calls whose `tool` equals it exactly.
    pub name: String,
    /// Parameter names in declaration order.
    pub params: Vec<String>,
    /// Parameters written with a trailing `?` (`read_file(path, start_line?)`): they may be left out.
    pub optional: Vec<String>,
}

impl Signature {
    /// Read a signature such as `write_file(path, content)` or `read_file(path, start_line?, end_line?)`.
    ///
    /// ```
    /// use tagloop_protocol::Signature;
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
    /// use tagloop_protocol::{parse_action, Signature};
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
/// use tagloop_protocol::parse_action;
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
/// use tagloop_protocol::{parse_action, parse_action_with, Signature};
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
        Err(e) => {
            let wants_value = e.expects_value();
            let mut error = e.into_action_error(region, base);
            if wants_value {
                let here = region.get(error.offset - base..).unwrap_or_default();
                if let Ok((_, word)) = ident(here)
                    && lex::keyword(here).is_err()
                {
                    error.message.push_str(&format!(
                        "; found the bare word `{word}`: text must be in quotes"
                    ));
                }
            }
            Err(error)
        }
    }
}
