//! Which reading of an action to take: choice vectors over the possible closing quotes, tried
//! earliest first under a fuel budget, strict before loose; and one layer of markdown around
//! the call removed first.

use std::cell::{Cell, RefCell};

use nom::error::ParseError;

use super::Call;
use super::error::{ECtx, Exp, PErr};
use super::grammar::Ctx;

/// Loose mode only adds readings where `)` is followed by more text; without such a `)` it would
/// repeat the strict search for nothing.
pub(super) fn loose_can_differ(region: &str) -> bool {
    let end = region
        .trim_end_matches(|c: char| c.is_ascii_whitespace())
        .len();
    memchr::memchr(b')', &region.as_bytes()[..end]).is_some_and(|first| first + 1 < end)
}

/// No positional argument after a named one.
pub(super) fn ordered(c: &Call) -> bool {
    let first_named = c.args.iter().position(|a| a.name.is_some());
    first_named.is_none_or(|i| c.args[i..].iter().all(|a| a.name.is_some()))
}

/// Fuel: bytes the whole search may parse (each attempt costs at least the input's length), per
/// input byte plus a constant: small actions get up to [`MAX_ATTEMPTS`], multi-MiB ones a few.
pub(super) const FUEL_PER_BYTE: usize = 3;
pub(super) const FUEL_FIXED: usize = 256 * 1024;
/// At most this many choice vectors are tried.
pub(super) const MAX_ATTEMPTS: usize = 64;

pub(super) enum Search {
    Accepted(Call),
    Parsed(Call),
    Failed(PErr),
}

/// Enumerate choice vectors earliest-first until a parse is accepted or fuel runs out.
pub(super) fn search(
    region: &str,
    loose: bool,
    accept: &dyn Fn(&Call) -> bool,
    fuel: &mut usize,
) -> Search {
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
            closed_at_end: Cell::new(false),
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
            Err(nom::Err::Error(mut e) | nom::Err::Failure(mut e)) => {
                e.maybe_open |= ctx.closed_at_end.get();
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

/// Remove one layer of markdown around the whole call (docs/protocol.md §1.1.9).
pub(super) fn strip_markdown(text: &str) -> (&str, Vec<String>) {
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
