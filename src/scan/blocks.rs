//! Ending a turn at a block it already wrote: a turn that may hold several blocks of one kind
//! (`tagloop serve`'s parallel calls: `<action>…</action>` after `<action>…</action>`) is cut as
//! soon as it closes a block whose body is the same as one it closed before.
//!
//! Small models at temperature 0 write their one call again and again until the token budget
//! runs out; the copies are dropped by the reader anyway, so every token after the first copy
//! is wasted time. The degeneration guard (`crate::llm::RepeatGuard`) needs a repetition of eight
//! units or several hundred bytes, far more than two copies of a call; this watch needs two.
//! The turn ends before the copy (its text keeps everything up to the end of the last block
//! that differed) as a stop (`Finish::Stop`) at the closing tag. A request may add a check
//! that every block after the first must pass, given the bodies of the blocks before it
//! ([`RepeatedBlock::later`]); one that fails it ends the turn the same way.

use std::fmt;
use std::sync::Arc;

/// Which blocks a turn ends at when one repeats (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct RepeatedBlock {
    /// The block's opening tag, e.g. `<action>`.
    pub open: String,
    /// Its closing tag, e.g. `</action>`.
    pub close: String,
    /// A check every block after the first must pass (given its trimmed body and the bodies of
    /// the blocks the turn kept before it, in order), else the turn ends before it as before a
    /// copy: serve's test that a further call is one the question asks for.
    pub later: Option<BlockCheck>,
}

/// A test of a block's body (see [`RepeatedBlock::later`]); equal when it is the same test.
#[derive(Clone)]
pub struct BlockCheck(pub Arc<BlockTest>);

/// The test a [`BlockCheck`] holds: a block's body, the bodies kept before it; whether it passes.
pub type BlockTest = dyn Fn(&str, &[String]) -> bool + Send + Sync;

impl fmt::Debug for BlockCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BlockCheck")
    }
}

impl PartialEq for BlockCheck {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl RepeatedBlock {
    /// Blocks between `open` and `close`.
    pub fn new(open: impl Into<String>, close: impl Into<String>) -> Self {
        RepeatedBlock {
            open: open.into(),
            close: close.into(),
            later: None,
        }
    }

    /// With a check for every block after the first.
    pub fn with_later(
        mut self,
        check: impl Fn(&str, &[String]) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.later = Some(BlockCheck(Arc::new(check)));
        self
    }
}

/// Watches a growing turn for a closed block that repeats an earlier one.
#[derive(Debug, Clone)]
pub(crate) struct BlockWatch {
    open: String,
    close: String,
    later: Option<BlockCheck>,
    /// The bodies of the blocks closed so far (trimmed).
    seen: Vec<String>,
    /// Where the next closing tag is looked for (the end of the last block seen).
    from: usize,
}

impl BlockWatch {
    /// A watch for `blocks`; `None` when a tag is empty (nothing could be found).
    pub(crate) fn new(blocks: &RepeatedBlock) -> Option<Self> {
        (!blocks.open.is_empty() && !blocks.close.is_empty()).then(|| BlockWatch {
            open: blocks.open.clone(),
            close: blocks.close.clone(),
            later: blocks.later.clone(),
            seen: Vec::new(),
            from: 0,
        })
    }

    /// The closing tag.
    pub(crate) fn close(&self) -> &str {
        &self.close
    }

    /// Look at `text` (the whole turn so far, grown since the last call): where to cut it when
    /// its newest closed block repeats an earlier one (the end of the text before that block,
    /// blanks left out), else `None`.
    pub(crate) fn check(&mut self, text: &str) -> Option<usize> {
        while let Some(rel) = text.get(self.from..)?.find(&self.close) {
            let close_at = self.from + rel;
            let end = close_at + self.close.len();
            let region = &text[self.from..close_at];
            let Some(open_rel) = region.rfind(&self.open) else {
                // A closing tag without its opening one: not a block; look past it.
                self.from = end;
                continue;
            };
            let open_at = self.from + open_rel;
            let body = text[open_at + self.open.len()..close_at].trim();
            let refused = |check: &BlockCheck| !(check.0)(body, &self.seen);
            if self.seen.iter().any(|b| b == body)
                || (!self.seen.is_empty() && self.later.as_ref().is_some_and(refused))
            {
                return Some(text[..open_at].trim_end().len());
            }
            self.seen.push(body.to_string());
            self.from = end;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch() -> BlockWatch {
        BlockWatch::new(&RepeatedBlock::new("<action>", "</action>")).unwrap()
    }

    #[test]
    fn the_second_copy_of_a_block_cuts_the_turn_before_it() {
        let mut w = watch();
        let first = "<thought>Go.</thought>\n<action>f(a=1)</action>";
        let text = format!("{first}\n<action> f(a=1) </action>\n<action>f(a=1)");
        // Fed in pieces, as a stream arrives: nothing until the copy is closed.
        let mut cut = None;
        for end in 1..=text.len() {
            if let Some(c) = w.check(&text[..end]) {
                cut = Some((end, c));
                break;
            }
        }
        let (seen_at, c) = cut.unwrap();
        assert_eq!(&text[..c], first);
        assert_eq!(
            &text[..seen_at],
            format!("{first}\n<action> f(a=1) </action>")
        );
    }

    #[test]
    fn different_blocks_go_on_and_a_later_copy_of_any_cuts() {
        let mut w = watch();
        let text = "<action>f(a=1)</action>\n<action>f(a=2)</action>\n";
        assert_eq!(w.check(text), None);
        let more = format!("{text}<action>g()</action>\n<action>f(a=1)</action>");
        assert_eq!(
            w.check(&more),
            Some(text.len() + "<action>g()</action>".len())
        );
    }

    #[test]
    fn a_closing_tag_without_an_opening_one_is_no_block() {
        let mut w = watch();
        assert_eq!(w.check("x</action> </action><action>a</action>"), None);
        assert_eq!(
            w.check("x</action> </action><action>a</action><action>a</action>"),
            Some(38)
        );
    }

    #[test]
    fn a_later_block_that_fails_the_check_cuts_too_the_first_never() {
        let blocks = RepeatedBlock::new("<action>", "</action>").with_later(|b, _| b.contains('a'));
        let mut w = BlockWatch::new(&blocks).unwrap();
        let text = "<action>x</action>\n<action>ya</action>";
        assert_eq!(w.check(text), None);
        let more = format!("{text}\n<action>z</action>");
        assert_eq!(w.check(&more), Some(text.len()));
    }

    #[test]
    fn the_check_sees_the_blocks_kept_before() {
        // A block may not start with a letter an earlier block started with.
        let blocks = RepeatedBlock::new("<action>", "</action>")
            .with_later(|b, before| !before.iter().any(|e| e.chars().next() == b.chars().next()));
        let mut w = BlockWatch::new(&blocks).unwrap();
        let text = "<action>ab</action><action>cd</action>";
        assert_eq!(w.check(text), None);
        let more = format!("{text}<action>ce</action>");
        assert_eq!(w.check(&more), Some(text.len()));
    }

    #[test]
    fn empty_tags_watch_nothing() {
        assert!(BlockWatch::new(&RepeatedBlock::new("", "</a>")).is_none());
    }
}
