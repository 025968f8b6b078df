//! The degeneration guard: notices, while a turn streams, that the model is repeating itself.
//!
//! Small models at low temperature fall into loops: the same line, sentence or few words over and
//! over until the token budget or the context runs out (minutes on a CPU). A repetition is the
//! tail of the text being *periodic*: the last `span` bytes are one unit of `period` bytes written
//! again and again. The guard fires when that span reaches [`RepeatGuard::min_span`] bytes and at
//! least [`RepeatGuard::min_repeats`] whole units, and says where the text should be cut: after
//! the first unit of the repetition, so the model's history shows what it did once, not fifty
//! times.
//!
//! A loop often counts as it goes (`31: thirty-th line`, `32: thirty-th line`, …), so the tail
//! is also read with every run of digits as one `#`; such a repetition needs twice as many units
//! (16), and a unit with words in it (four letters or more), so that rows of numbers are not
//! taken for a loop.
//!
//! Legitimate text repeats too (a separator line, table rows in a file being written), so the
//! thresholds are generous: a unit of 4 bytes must repeat over 512 bytes (128 times), a line of
//! 80 bytes 8 times. Rows that differ only in their numbers and carry words (`12,apples,3`) are
//! cut after 16 rows and 512 bytes: a turn that writes such a file needs `keep_repetitions`.
//!
//! A grammar-held thought is one line in which nothing repeats legitimately, and neither does a
//! sentence of a free-text answer: while none of the request's
//! `TurnRequest::strict_repeats_until` strings (the
//! decision's tags, or `<action>` alone when the answer is free text) has appeared, a unit that
//! holds words (four letters or more) repeated [`STRICT_REPEATS`] times over [`STRICT_SPAN`]
//! bytes is enough (a sentence said three times), so a small model looping in its thought or its
//! answer is cut after a few dozen tokens instead of a few hundred. A unit without words (a ruler
//! of dashes, a table's rule line) is left to the ordinary thresholds.
//!
//! In an action's arguments a sentence may repeat legitimately (the task asked for it, or a call
//! copies a file the run read), so the ordinary thresholds hold there.
//!
//! (Two policies once made the guard read a run's turns against what the run had been told:
//! `given`, the strict thresholds in a call's arguments for a sentence the run was never given,
//! and `echo`, a free answer or a call cut where it said the runtime's own notes again. On the
//! agent's validation split neither paid on the models they were written for, and both were
//! deleted: docs/configuration.md.)
//!
//! In a constrained turn the guard also ends a *counting runaway*: a last line whose tail holds
//! no word (digits, dates, punctuation, spaces) beyond a bound — 128 bytes in a thought or a
//! free answer (the strict phase), 256 bytes in an action's arguments (after `<action>`), none
//! in a JSON answer — cut after its first few items (see `wordless.rs`).
//!
//! Checking is cheap: it runs only when 64 more bytes have arrived, on the last 4 KiB, for
//! ordinary text each candidate period fails at its first comparison, and the digits-as-one
//! reading reuses the guard's buffers (see `benches/llm.rs`, `repeat_guard`).

use super::wordless::{WORDLESS_LINE, WORDLESS_PROSE, wordless_tail};

/// Watches a growing text for a repeating tail.
#[derive(Debug, Clone)]
pub struct RepeatGuard {
    /// Bytes of the text seen so far (the guard keeps no copy; the caller passes the text).
    checked_at: usize,
    /// Reused buffers for the digits-as-one reading of the window.
    norm: Vec<u8>,
    origin: Vec<usize>,
    min_span: usize,
    min_repeats: usize,
    max_period: usize,
    /// Only a unit that holds words counts (the strict guard: sentences said again).
    words_only: bool,
    /// While none of these has appeared in the text, the strict thresholds apply.
    strict_until: Vec<String>,
    /// Bytes of the text already searched for `strict_until`.
    strict_seen: usize,
    /// The turn is constrained: a run without a word is a counting runaway (see `wordless.rs`).
    wordless: bool,
    /// `<action>` has appeared: a wordless run is counted on its line, with the larger bound.
    in_action: bool,
    /// Bytes of the text already searched for `<action>`.
    action_seen: usize,
}

/// What a constrained turn's guard watches for beyond the ordinary repetition: plain data, read
/// off the request by the model client (see [`RepeatGuard::watching`]). The default watches for
/// nothing more.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Watch {
    /// While none of these has appeared in the text, the strict thresholds apply.
    pub strict_until: Vec<String>,
    /// A run without a word is a counting runaway (see `wordless.rs`).
    pub cut_counting: bool,
}

/// What the guard found at the end of a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RepetitionKind {
    /// One unit written again and again.
    Unit,
    /// A counting runaway in a constrained turn: a long run of text without a word (digits,
    /// dates, punctuation); `period` is then the length of its kept start and `repeats` 1.
    Wordless,
}

/// The strict guard's smallest repeating span, in bytes (see the module docs).
pub(crate) const STRICT_SPAN: usize = 96;
/// The strict guard's fewest whole units.
pub(crate) const STRICT_REPEATS: usize = 3;

/// A repetition found at the end of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repetition {
    /// The length of the repeating unit, in bytes.
    pub period: usize,
    /// Where the repetition starts (a byte offset into the text).
    pub start: usize,
    /// Where to cut: after the first unit of the repetition (a char boundary).
    pub cut: usize,
    /// How many whole units the repetition holds.
    pub repeats: usize,
    /// A repeated unit, or a run without a word.
    pub kind: RepetitionKind,
}

/// The tag after which a wordless run is counted on its line (an action's arguments).
const ACTION: &str = "<action>";

/// How much new text arrives between two checks.
const CHECK_EVERY: usize = 64;
/// How much of the tail is looked at.
const WINDOW: usize = 4096;

impl Default for RepeatGuard {
    fn default() -> Self {
        RepeatGuard::new(512, 8, 512)
    }
}

impl RepeatGuard {
    /// A guard that fires when a unit of at most `max_period` bytes repeats over at least
    /// `min_span` bytes and at least `min_repeats` times.
    pub fn new(min_span: usize, min_repeats: usize, max_period: usize) -> Self {
        RepeatGuard {
            checked_at: 0,
            norm: Vec::new(),
            origin: Vec::new(),
            min_span: min_span.max(1),
            min_repeats: min_repeats.max(2),
            max_period: max_period.clamp(1, WINDOW / 2),
            words_only: false,
            strict_until: Vec::new(),
            strict_seen: 0,
            wordless: false,
            in_action: false,
            action_seen: 0,
        }
    }

    /// The default guard, made strict where `watch` says (a constrained turn's settings; the
    /// model client reads them off its request in `RepeatGuard::for_request`, in `src/llm/`):
    /// strict until one of `watch.strict_until` appears, and cutting counting runaways when
    /// `watch.cut_counting` (see the module docs).
    pub fn watching(watch: Watch) -> Self {
        RepeatGuard {
            strict_until: watch.strict_until,
            wordless: watch.cut_counting,
            ..RepeatGuard::default()
        }
    }

    /// The smallest repeating span, in bytes, that fires the guard.
    pub fn min_span(&self) -> usize {
        self.min_span
    }

    /// The fewest whole units that fire the guard.
    pub fn min_repeats(&self) -> usize {
        self.min_repeats
    }

    /// Look at `text` (the whole turn so far, grown since the last call) and report a
    /// repetition at its end, if there is one. Cheap to call on every chunk.
    pub fn check(&mut self, text: &str) -> Option<Repetition> {
        // The strict phase ends for good at the first of its strings (looked for in what arrived
        // since the last piece, and the few bytes before it a string may straddle).
        if !self.strict_until.is_empty() {
            let back = self.strict_until.iter().map(String::len).max().unwrap_or(0);
            let from = self.strict_seen.saturating_sub(back).min(text.len());
            let new = &text.as_bytes()[from..];
            if self
                .strict_until
                .iter()
                .any(|u| memchr::memmem::find(new, u.as_bytes()).is_some())
            {
                self.strict_until.clear();
            }
            self.strict_seen = text.len();
        }
        if self.wordless && !self.in_action {
            let from = self
                .action_seen
                .saturating_sub(ACTION.len())
                .min(text.len());
            self.in_action =
                memchr::memmem::find(&text.as_bytes()[from..], ACTION.as_bytes()).is_some();
            self.action_seen = text.len();
        }
        if text.len() < self.checked_at + CHECK_EVERY {
            return None;
        }
        self.checked_at = text.len();
        let (mut norm, mut origin) = (
            std::mem::take(&mut self.norm),
            std::mem::take(&mut self.origin),
        );
        if let Some(run) = self.wordless_run(text) {
            (self.norm, self.origin) = (norm, origin);
            return Some(run);
        }
        let strict = (!self.strict_until.is_empty()).then(|| RepeatGuard {
            words_only: true,
            ..RepeatGuard::new(STRICT_SPAN, STRICT_REPEATS, self.max_period)
        });
        // What the strict thresholds let pass (a ruler of dashes) the ordinary ones still see.
        let found = strict
            .and_then(|s| s.find_with(text, &mut norm, &mut origin))
            .or_else(|| self.find_with(text, &mut norm, &mut origin));
        (self.norm, self.origin) = (norm, origin);
        found
    }

    /// A counting runaway on the last line of a constrained turn: in the strict phase (a
    /// thought, a free answer), or after `<action>` with the larger bound; never in a JSON
    /// answer.
    fn wordless_run(&self, text: &str) -> Option<Repetition> {
        if !self.wordless {
            return None;
        }
        let run = if !self.strict_until.is_empty() {
            wordless_tail(text, WORDLESS_PROSE)
        } else if self.in_action {
            wordless_tail(text, WORDLESS_LINE)
        } else {
            None
        }?;
        Some(Repetition {
            period: run.cut - run.start,
            start: run.start,
            cut: run.cut,
            repeats: 1,
            kind: RepetitionKind::Wordless,
        })
    }

    /// Look at the end of `text` now, whatever was checked before (for the end of a turn).
    pub fn find(&self, text: &str) -> Option<Repetition> {
        self.find_with(text, &mut Vec::new(), &mut Vec::new())
    }

    fn find_with(
        &self,
        text: &str,
        norm: &mut Vec<u8>,
        origin: &mut Vec<usize>,
    ) -> Option<Repetition> {
        let bytes = text.as_bytes();
        let offset = bytes.len().saturating_sub(WINDOW);
        let window = &bytes[offset..];
        let to_text = |i: usize| offset + i;
        if let Some(t) = periodic_tail(window, self.max_period, self.min_span, self.min_repeats) {
            let unit = &window[window.len() - t.span..][..t.period];
            if !self.words_only || holds_words(unit) {
                return Some(t.repetition(text, to_text));
            }
        }
        // The same line with a counter in it ("31: thirty-th line", "32: thirty-th line", …):
        // every run of digits reads as one `#`, and the unit must hold words, so that a table
        // of numbers being written is not mistaken for a loop.
        if !window.iter().any(u8::is_ascii_digit) {
            return None;
        }
        numbers_as_one(window, norm, origin);
        let t = periodic_tail(
            norm,
            self.max_period,
            self.min_span,
            self.min_repeats.saturating_mul(2),
        )?;
        let unit = &norm[norm.len() - t.span..][..t.period];
        holds_words(unit).then(|| t.repetition(text, |i| offset + origin[i]))
    }
}

/// Whether a repeating unit holds words: four letters or more (any non-ASCII byte counts).
fn holds_words(unit: &[u8]) -> bool {
    unit.iter()
        .filter(|b| b.is_ascii_alphabetic() || **b >= 0x80)
        .count()
        >= 4
}

/// A periodic tail of a byte string: its last `span` bytes repeat one unit of `period` bytes.
struct Tail {
    period: usize,
    span: usize,
    repeats: usize,
    /// The length of the string it was found in.
    len: usize,
}

impl Tail {
    /// Where the repetition starts and where to cut, in `text`, given how a position in the
    /// searched string maps to one in the text.
    fn repetition(&self, text: &str, to_text: impl Fn(usize) -> usize) -> Repetition {
        let first = self.len - self.span;
        let start = to_text(first);
        let mut cut = to_text(first + self.period);
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        Repetition {
            period: cut - start,
            start,
            cut,
            repeats: self.repeats,
            kind: RepetitionKind::Unit,
        }
    }
}

/// The shortest period at which the end of `s` repeats over at least `min_span` bytes and
/// `min_repeats` whole units.
fn periodic_tail(s: &[u8], max_period: usize, min_span: usize, min_repeats: usize) -> Option<Tail> {
    let n = s.len();
    for period in 1..=max_period.min(n / 2) {
        // How far back from the end the text keeps this period.
        let mut span = period;
        while span < n && s[n - 1 - span] == s[n - 1 - span + period] {
            span += 1;
        }
        // `span` bytes at the end repeat with `period` (the first unit included).
        let repeats = span / period;
        if span >= min_span && repeats >= min_repeats {
            return Some(Tail {
                period,
                span,
                repeats,
                len: n,
            });
        }
        if span > n / 2 {
            // A longer period cannot cover more than this one already did.
            break;
        }
    }
    None
}

/// `s` with every run of ASCII digits written as one `#` (into `norm`), and for each byte of it
/// the position in `s` it came from (into `origin`); both buffers are cleared first.
fn numbers_as_one(s: &[u8], norm: &mut Vec<u8>, origin: &mut Vec<usize>) {
    norm.clear();
    origin.clear();
    for (i, &b) in s.iter().enumerate() {
        if b.is_ascii_digit() {
            if i > 0 && s[i - 1].is_ascii_digit() {
                continue;
            }
            norm.push(b'#');
        } else {
            norm.push(b);
        }
        origin.push(i);
    }
}
