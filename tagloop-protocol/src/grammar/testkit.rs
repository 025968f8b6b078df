//! Test support for the grammar: random strings a grammar accepts (the sampler), and whether a
//! grammar accepts a given string (a plain backtracking matcher). Both walk the same `Expr` tree
//! the GBNF text is written from, so what they say holds for the text sent to a server.

use super::expr::{ClassItem, Expr, Grammar};

/// A small deterministic generator (xorshift), seeded by proptest.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// Characters tried for classes: the ones that matter to the protocol, many times over.
const POOL: &str = "<<<<///>>\"\"\"\\\\aAtThHiInNkKoOcCfF_ eé中\n\t0123{}[],:=()'xyz";

struct Sampler<'g> {
    g: &'g Grammar,
    rng: Rng,
    out: String,
    expansions: usize,
}

impl Sampler<'_> {
    /// Past this depth or budget, the shortest way out is taken.
    fn short(&self, depth: usize) -> bool {
        depth > 60 || self.expansions > 4000 || self.out.len() > 3000
    }

    fn walk(&mut self, e: &Expr, depth: usize) {
        match e {
            Expr::Lit(s) => self.out.push_str(s),
            Expr::Class { .. } => {
                let pool: Vec<char> = POOL.chars().filter(|&c| e.class_matches(c)).collect();
                let c = if pool.is_empty() {
                    // A positive class of characters outside the pool: its first one.
                    match e {
                        Expr::Class { items, .. } => match items.first() {
                            Some(ClassItem::Char(c)) | Some(ClassItem::Range(c, _)) => *c,
                            None => 'x',
                        },
                        _ => 'x',
                    }
                } else {
                    pool[self.rng.below(pool.len())]
                };
                self.out.push(c);
            }
            Expr::Ref(name) => {
                self.expansions += 1;
                let rule = self.g.get(name).cloned().unwrap_or(Expr::Seq(Vec::new()));
                self.walk(&rule, depth + 1);
            }
            Expr::Seq(items) => items.iter().for_each(|x| self.walk(x, depth)),
            Expr::Alt(items) => {
                let i = if self.short(depth) {
                    0
                } else {
                    self.rng.below(items.len())
                };
                self.walk(&items[i], depth);
            }
            Expr::Repeat { expr, min, max } => {
                let spread = max.map_or(4, |m| (m - min).min(4)) as usize;
                let n = if self.short(depth) {
                    *min as usize
                } else {
                    *min as usize + self.rng.below(spread + 1)
                };
                for _ in 0..n {
                    self.walk(expr, depth);
                }
            }
        }
    }
}

pub(super) fn sample(g: &Grammar, seed: u64) -> String {
    let mut s = Sampler {
        g,
        rng: Rng(seed | 1),
        out: String::new(),
        expansions: 0,
    };
    let root = g.get("root").cloned().expect("root");
    s.walk(&root, 0);
    s.out
}

/// Whether the grammar matches the whole string (a plain backtracking matcher, for tests).
pub(super) fn matches(g: &Grammar, s: &str) -> bool {
    fn go<'a>(g: &'a Grammar, e: &'a Expr, s: &'a str, k: &mut dyn FnMut(&'a str) -> bool) -> bool {
        match e {
            Expr::Lit(l) => s.strip_prefix(l.as_str()).is_some_and(&mut *k),
            Expr::Class { .. } => {
                let mut it = s.chars();
                match it.next() {
                    Some(c) if e.class_matches(c) => k(it.as_str()),
                    _ => false,
                }
            }
            Expr::Ref(n) => g.get(n).is_some_and(|r| go(g, r, s, k)),
            Expr::Seq(items) => seq(g, items, s, k),
            Expr::Alt(items) => items.iter().any(|x| go(g, x, s, k)),
            Expr::Repeat { expr, min, max } => rep(g, expr, *min, *max, s, k),
        }
    }
    fn seq<'a>(
        g: &'a Grammar,
        items: &'a [Expr],
        s: &'a str,
        k: &mut dyn FnMut(&'a str) -> bool,
    ) -> bool {
        match items.split_first() {
            None => k(s),
            Some((first, rest)) => go(g, first, s, &mut |r| seq(g, rest, r, k)),
        }
    }
    fn rep<'a>(
        g: &'a Grammar,
        e: &'a Expr,
        min: u32,
        max: Option<u32>,
        s: &'a str,
        k: &mut dyn FnMut(&'a str) -> bool,
    ) -> bool {
        if min == 0 && k(s) {
            return true;
        }
        if max == Some(0) {
            return false;
        }
        go(g, e, s, &mut |r| {
            r.len() < s.len() && rep(g, e, min.saturating_sub(1), max.map(|m| m - 1), r, k)
        })
    }
    let root = g.get("root").expect("root");
    go(g, root, s, &mut |r| r.is_empty())
}
