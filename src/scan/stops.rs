//! Client-side stop enforcement: one boundary scanner over a stream of text deltas.
//!
//! [`StopScanner`] is fed text chunks as they arrive and hands back the part that is safe to show:
//! text that can no longer become the start of a stop string. Whatever might still turn into a
//! stop (a trailing `</act` while `</action>` is a stop) is held back, so no partial stop string
//! ever reaches the caller. The hold-back is never longer than the longest stop minus one byte.
//!
//! Semantics (the same as a server that generates token by token and stops as soon as a stop
//! string is complete):
//!
//! * the stop that fires is the one whose match **ends first** in the stream; when two matches end
//!   at the same byte, the one that starts first (the longer) wins. This makes the result
//!   independent of how the stream is chunked;
//! * the text before the match is the turn's text; the stop string and everything after it is
//!   dropped (further pushes are ignored);
//! * [`StopScanner::finish`] ends the stream: a trailing proper prefix of a stop string
//!   (`</act`, `<observ`) is removed, as a server that flushed a partial stop would have left it.
//!
//! Matching is byte-exact (case-sensitive). Stops are `&str`, so every cut falls on a character
//! boundary: the scanner never splits a UTF-8 character. Empty stop strings are ignored.

use memchr::memmem;

/// Scans a stream of text for stop strings, holding back anything that could still become one.
#[derive(Debug, Clone)]
pub struct StopScanner {
    stops: Vec<String>,
    finders: Vec<memmem::Finder<'static>>,
    /// Distinct first bytes of the stops, when there are at most three (fast path).
    first_bytes: Vec<u8>,
    min_len: usize,
    max_len: usize,
    /// Everything received so far (cut at the stop once one fired).
    buf: String,
    /// `buf[..emitted]` has been handed to the caller.
    emitted: usize,
    fired: Option<usize>,
    finished: bool,
    dropped_tail: usize,
}

impl StopScanner {
    /// A scanner for the given stop strings (empty strings are ignored).
    pub fn new<I, S>(stops: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let stops: Vec<String> = stops
            .into_iter()
            .map(|s| s.as_ref().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        let finders = stops
            .iter()
            .map(|s| memmem::Finder::new(s.as_bytes()).into_owned())
            .collect();
        let mut first_bytes: Vec<u8> = stops.iter().map(|s| s.as_bytes()[0]).collect();
        first_bytes.sort_unstable();
        first_bytes.dedup();
        if first_bytes.len() > 3 {
            first_bytes.clear();
        }
        let min_len = stops.iter().map(String::len).min().unwrap_or(0);
        let max_len = stops.iter().map(String::len).max().unwrap_or(0);
        StopScanner {
            stops,
            finders,
            first_bytes,
            min_len,
            max_len,
            // A turn is a few hundred bytes: room for it up front spares the regrowths (and
            // stays below glibc's large-chunk size, whose allocation sweeps the fast bins).
            buf: String::with_capacity(512),
            emitted: 0,
            fired: None,
            finished: false,
            dropped_tail: 0,
        }
    }

    /// The stop strings this scanner enforces.
    pub fn stops(&self) -> &[String] {
        &self.stops
    }

    /// Push a chunk; returns the text that became safe to emit (possibly empty).
    ///
    /// Once a stop has fired, or after [`finish`](Self::finish), further chunks are ignored and
    /// the result is empty.
    pub fn push(&mut self, chunk: &str) -> &str {
        if self.fired.is_some() || self.finished {
            return "";
        }
        let start = self.emitted;
        // Fast path: nothing held back and no byte of the chunk can start a stop.
        if start == self.buf.len()
            && !self.first_bytes.is_empty()
            && !self.may_start_stop(chunk.as_bytes())
        {
            self.buf.push_str(chunk);
            self.emitted = self.buf.len();
            return &self.buf[start..];
        }
        self.buf.push_str(chunk);
        if self.stops.is_empty() {
            self.emitted = self.buf.len();
            return &self.buf[start..];
        }
        if let Some((idx, at)) = self.find_first_match(start) {
            self.fired = Some(idx);
            self.buf.truncate(at);
            self.emitted = at;
            return &self.buf[start..at];
        }
        let safe = self.partial_start(start);
        self.emitted = safe;
        &self.buf[start..safe]
    }

    /// End of the stream: returns the remaining safe text (a trailing proper prefix of a stop
    /// string is removed and counted in [`dropped_tail`](Self::dropped_tail)).
    pub fn finish(&mut self) -> &str {
        if self.finished || self.fired.is_some() {
            self.finished = true;
            return "";
        }
        self.finished = true;
        let start = self.emitted;
        // By construction the held tail is exactly a proper prefix of some stop string.
        self.dropped_tail = self.buf.len() - start;
        self.buf.truncate(start);
        ""
    }

    fn may_start_stop(&self, bytes: &[u8]) -> bool {
        match self.first_bytes.as_slice() {
            [a] => memchr::memchr(*a, bytes).is_some(),
            [a, b] => memchr::memchr2(*a, *b, bytes).is_some(),
            [a, b, c] => memchr::memchr3(*a, *b, *c, bytes).is_some(),
            _ => true,
        }
    }

    /// The stop string that fired, if one did.
    pub fn stopped(&self) -> Option<&str> {
        self.fired
            .and_then(|i| self.stops.get(i))
            .map(String::as_str)
    }

    /// Whether a stop string fired.
    pub fn is_stopped(&self) -> bool {
        self.fired.is_some()
    }

    /// Everything emitted so far: after a stop fired, the whole text before it.
    pub fn text(&self) -> &str {
        &self.buf[..self.emitted]
    }

    /// Bytes currently held back (a possible start of a stop string).
    pub fn held(&self) -> &str {
        &self.buf[self.emitted..]
    }

    /// How many bytes [`finish`](Self::finish) removed as a partial stop string.
    pub fn dropped_tail(&self) -> usize {
        self.dropped_tail
    }

    /// The text before the stop (or everything emitted, if none fired), consuming the scanner.
    pub fn into_text(mut self) -> String {
        self.buf.truncate(self.emitted);
        self.buf
    }

    /// Cut a whole text at its first stop (same semantics as streaming it): the text before the
    /// stop, and the stop that fired. A trailing partial stop is *not* removed.
    pub fn cut<'t>(text: &'t str, stops: &[String]) -> (&'t str, Option<usize>) {
        let scanner = StopScanner::new(stops);
        match scanner.find_first_match_in(text.as_bytes(), 0) {
            Some((idx, at)) => {
                // Map back to the caller's stop list (empty stops were filtered out).
                let stop = &scanner.stops[idx];
                let orig = stops.iter().position(|s| s == stop);
                (&text[..at], orig)
            }
            None => (text, None),
        }
    }

    /// The earliest-ending match that starts at or after `from`: (stop index, match start).
    fn find_first_match(&self, from: usize) -> Option<(usize, usize)> {
        self.find_first_match_in(self.buf.as_bytes(), from)
    }

    fn find_first_match_in(&self, hay: &[u8], from: usize) -> Option<(usize, usize)> {
        if self.stops.is_empty() || hay.len() < from + self.min_len {
            return None;
        }
        let region = &hay[from..];
        // (end, start, idx)
        let mut best: Option<(usize, usize, usize)> = None;
        let consider = |best: &mut Option<(usize, usize, usize)>, start: usize, idx: usize| {
            let end = start + self.stops[idx].len();
            let better = match *best {
                None => true,
                Some((be, bs, _)) => end < be || (end == be && start < bs),
            };
            if better {
                *best = Some((end, start, idx));
            }
        };
        if !self.first_bytes.is_empty() {
            let check = |p: usize, best: &mut Option<(usize, usize, usize)>| -> bool {
                if let Some((be, _, _)) = *best
                    && from + p + self.min_len > be
                {
                    return false;
                }
                let rest = &region[p..];
                for (idx, s) in self.stops.iter().enumerate() {
                    if rest.starts_with(s.as_bytes()) {
                        consider(best, from + p, idx);
                    }
                }
                true
            };
            match self.first_bytes.as_slice() {
                [a] => {
                    for p in memchr::memchr_iter(*a, region) {
                        if !check(p, &mut best) {
                            break;
                        }
                    }
                }
                [a, b] => {
                    for p in memchr::memchr2_iter(*a, *b, region) {
                        if !check(p, &mut best) {
                            break;
                        }
                    }
                }
                [a, b, c] => {
                    for p in memchr::memchr3_iter(*a, *b, *c, region) {
                        if !check(p, &mut best) {
                            break;
                        }
                    }
                }
                _ => {}
            }
        } else {
            for (idx, f) in self.finders.iter().enumerate() {
                if let Some(p) = f.find(region) {
                    consider(&mut best, from + p, idx);
                }
            }
        }
        best.map(|(_, start, idx)| (idx, start))
    }

    /// The earliest position `p >= from` such that `buf[p..]` is a proper prefix of a stop
    /// string (or `buf.len()` when there is none). Everything before it is safe to emit.
    fn partial_start(&self, from: usize) -> usize {
        let bytes = self.buf.as_bytes();
        let len = bytes.len();
        let lo = len.saturating_sub(self.max_len.saturating_sub(1)).max(from);
        let tail = &bytes[lo..];
        let is_partial = |p: usize| {
            let rest = &tail[p..];
            self.stops
                .iter()
                .any(|s| s.len() > rest.len() && s.as_bytes().starts_with(rest))
        };
        match self.first_bytes.as_slice() {
            [a] => memchr::memchr_iter(*a, tail).find(|&p| is_partial(p)),
            [a, b] => memchr::memchr2_iter(*a, *b, tail).find(|&p| is_partial(p)),
            [a, b, c] => memchr::memchr3_iter(*a, *b, *c, tail).find(|&p| is_partial(p)),
            _ => (0..tail.len()).find(|&p| is_partial(p)),
        }
        .map_or(len, |p| lo + p)
    }
}
