//! A count of the scanning work the turn reader does, so that tests prove it linear by counting
//! steps instead of timing them (issue 21, item 6). Outside `cfg(test)` [`step`] is empty and
//! compiles away.
//!
//! A step is one unit of work that grows with the input: a byte a scan looks at, a masked range
//! or a block compared with a position. Counting them where the loops are is what lets a test
//! tell a reader that looks at each byte a few times from one that rescans the rest of the turn
//! for every tag.

#[cfg(test)]
thread_local! {
    static STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Count `n` steps of scanning work on this thread (tests only; nothing otherwise).
#[inline(always)]
pub(crate) fn step(n: usize) {
    #[cfg(test)]
    STEPS.with(|s| s.set(s.get().saturating_add(n as u64)));
    #[cfg(not(test))]
    let _ = n;
}

/// The steps counted on this thread since the last call, and the count reset to zero.
#[cfg(test)]
pub(crate) fn take() -> u64 {
    STEPS.with(|s| s.replace(0))
}
