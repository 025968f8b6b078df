//! The members of an object, or the arguments of a call, in a grammar of bounded size: each
//! member's least form held in the budget before any is built, and optional members written
//! as a chain of rules, linear in their number.

use super::budget::NAME_MAX;
use super::expr::Expr;
use super::values::Values;

/// The members of an object (or the arguments of a call) as they are built, in the budget.
///
/// Every member's least form (its key with any value) is held in the budget from the start,
/// so the sub-schemas of the first members cannot leave the later ones without room: when a
/// schema is too large, the members whose sub-schemas do not fit accept any value while the
/// object keeps its shape, and the object as a whole is simplified only when its keys alone do
/// not fit.
pub(super) struct Members {
    base: String,
    required: Vec<Expr>,
    optional: Vec<Expr>,
    /// What a member costs besides its own text: a separator, and with no required member a
    /// chain of two rules (names of up to [`NAME_MAX`] bytes and a suffix, referred to twice).
    overhead: usize,
    /// Bytes held in the budget for these members.
    held: usize,
}

impl Members {
    /// Members of the rule `base`: `count` of them, whose least forms take `least` bytes in
    /// all; `chained` when none is required. `None` when those do not fit the budget.
    pub(super) fn start(
        values: &mut Values<'_>,
        base: &str,
        count: usize,
        least: usize,
        chained: bool,
    ) -> Option<Self> {
        let chain = if chained && count > 3 {
            4 * (base.len().min(NAME_MAX) + 16) + 32
        } else {
            0
        };
        let overhead = 16 + chain;
        let held = least.saturating_add(count.saturating_mul(overhead));
        if !values.room(held) {
            return None;
        }
        values.hold(held);
        Some(Members {
            base: base.to_owned(),
            required: Vec::new(),
            optional: Vec::new(),
            overhead,
            held,
        })
    }

    /// Add a member: `build` makes its value, `write` the member from a value. A value whose
    /// rules and member do not fit the budget is taken back, and the member accepts any value.
    pub(super) fn add(
        &mut self,
        values: &mut Values<'_>,
        required: bool,
        build: impl FnOnce(&mut Values<'_>) -> Expr,
        write: impl Fn(Expr) -> Expr,
    ) {
        let floor = write(Expr::rule("value")).gbnf_len() + self.overhead;
        let mark = values.mark();
        let member = write(build(values));
        let bytes = member.gbnf_len() + self.overhead;
        values.release(floor);
        let (member, bytes) = if values.room(bytes) {
            (member, bytes)
        } else {
            // Back to the mark, where this member's least form was still held: it fits.
            values.rollback(mark);
            values.release(floor);
            let member = write(values.simplify());
            let bytes = member.gbnf_len() + self.overhead;
            (member, bytes)
        };
        values.hold(bytes);
        self.held = self.held.saturating_sub(floor) + bytes;
        if required {
            self.required.push(member);
        } else {
            self.optional.push(member);
        }
    }

    /// The members as one expression (see [`Values::members`]), the held bytes given back
    /// first so the rules can be charged for what they really are.
    pub(super) fn finish(self, values: &mut Values<'_>, sep: &Expr) -> Option<Expr> {
        values.release(self.held);
        values.members(&self.base, self.required, self.optional, sep)
    }
}

impl Values<'_> {
    /// Every required item in order, then any of the optional ones in order, separated by
    /// `sep`; `None` when the rules this needs do not fit the budget.
    ///
    /// With a required item first, each optional one is `(sep item)?`. Without one, the first
    /// item present has no separator before it; spelling out "item k first, then any of the
    /// ones after it" writes item k once per item before it (quadratic), so past three items
    /// it is a chain of rules where each item is written once:
    ///
    /// ```text
    /// {base}-from-k ::= item_k {base}-rest-k+1 | {base}-from-k+1   (the first present is k or later)
    /// {base}-rest-k ::= (sep {base}-from-k)?                       (any of those from k on)
    /// ```
    pub(super) fn members(
        &mut self,
        base: &str,
        required: Vec<Expr>,
        optional: Vec<Expr>,
        sep: &Expr,
    ) -> Option<Expr> {
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
            return Some(Expr::seq(items));
        }
        let n = optional.len();
        if n == 0 {
            return Some(Expr::Seq(Vec::new()));
        }
        if n <= 3 {
            // Up to three items the spelled-out form is no longer than the chain.
            let mut alts = Vec::new();
            for first in 0..n {
                let mut items = vec![optional[first].clone()];
                for o in &optional[first + 1..] {
                    items.push(Expr::seq([sep.clone(), o.clone()]).opt());
                }
                alts.push(Expr::seq(items));
            }
            return Some(Expr::alt(alts).opt());
        }
        // Built from the last item back, so each rule refers only to rules defined before it.
        let from_base = format!("{base}-from");
        let rest_base = format!("{base}-rest");
        let mut next_from: Option<String> = None;
        for item in optional.into_iter().rev() {
            let from = self.fresh(&from_base);
            let body = match &next_from {
                Some(next) => {
                    let rest = self.fresh(&rest_base);
                    let chain = Expr::seq([sep.clone(), Expr::rule(next.clone())]).opt();
                    if !self.define_charged(&rest, chain) {
                        return None;
                    }
                    Expr::alt([
                        Expr::seq([item, Expr::rule(rest)]),
                        Expr::rule(next.clone()),
                    ])
                }
                None => item,
            };
            if !self.define_charged(&from, body) {
                return None;
            }
            next_from = Some(from);
        }
        next_from.map(|first| Expr::rule(first).opt())
    }
}
