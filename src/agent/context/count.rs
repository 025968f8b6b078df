//! Counting a prompt's tokens without asking the server every turn.
//!
//! A server's own tokenizer (`/tokenize`) is exact but costs a request, so the loop estimates
//! first and asks only when the estimate says the request is near the window. The estimate is
//! calibrated by what the server reports: every answer says how many tokens its prompt took
//! (`prompt_tokens`), and the next prompt is that prompt plus some new text, so the estimate is
//! the last true count plus the new bytes at the bytes-per-token the server showed. Before the
//! first answer it assumes 3 bytes per token, fewer than English text needs (about 4), so the
//! first guess errs on the large side.

use crate::llm::Prompt;

/// Bytes per token before any answer calibrated it (conservative: most text is nearer 4).
const DEFAULT_BYTES_PER_TOKEN: f64 = 3.0;

/// Bytes counted for each chat message beyond its text: the role markers a chat template wraps
/// it in (a few tokens each).
const MESSAGE_OVERHEAD_BYTES: u64 = 16;

/// The calibration is kept within these bounds, so that one odd report (a server that counts
/// the cached part of a prompt only, say) cannot make every later estimate absurd.
const BOUNDS: (f64, f64) = (1.0, 8.0);

/// Estimates a prompt's tokens from its size, calibrated by the counts the server reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenEstimator {
    bytes_per_token: f64,
    /// The last prompt's size in bytes (as [`prompt_bytes`] measures) and its true token count.
    last: Option<(u64, u64)>,
}

impl Default for TokenEstimator {
    fn default() -> Self {
        TokenEstimator {
            bytes_per_token: DEFAULT_BYTES_PER_TOKEN,
            last: None,
        }
    }
}

impl TokenEstimator {
    /// An estimator at the conservative default (3 bytes per token).
    pub fn new() -> Self {
        Self::default()
    }

    /// The bytes per token the estimate uses now.
    pub fn bytes_per_token(&self) -> f64 {
        self.bytes_per_token
    }

    /// The estimated tokens of a prompt of `bytes` bytes (as [`prompt_bytes`] measures): the last
    /// true count plus the growth since, or, when the prompt is smaller than the last one (a
    /// fitted history), its size at the calibrated rate. Rounded up.
    pub fn estimate(&self, bytes: u64) -> u64 {
        match self.last {
            Some((b, t)) if bytes >= b => t + self.tokens_of(bytes - b),
            _ => self.tokens_of(bytes),
        }
    }

    /// Bytes worth `tokens` tokens at the calibrated rate (rounded up).
    pub fn bytes_of(&self, tokens: u64) -> u64 {
        (tokens as f64 * self.bytes_per_token).ceil() as u64
    }

    /// Tokens of `bytes` bytes at the calibrated rate (rounded up).
    pub fn tokens_of(&self, bytes: u64) -> u64 {
        (bytes as f64 / self.bytes_per_token).ceil() as u64
    }

    /// Learn from a true count: a prompt of `bytes` bytes took `tokens` tokens (an answer's
    /// `prompt_tokens`, or the server's tokenizer). A zero count (a server that reports none)
    /// teaches nothing.
    pub fn observe(&mut self, bytes: u64, tokens: u64) {
        if tokens == 0 || bytes == 0 {
            return;
        }
        self.bytes_per_token = (bytes as f64 / tokens as f64).clamp(BOUNDS.0, BOUNDS.1);
        self.last = Some((bytes, tokens));
    }
}

/// The size of a prompt for [`TokenEstimator`]: the text's bytes, and for chat the messages'
/// bytes plus a few for each message's role markers.
pub fn prompt_bytes(prompt: &Prompt) -> u64 {
    match prompt {
        Prompt::Chat(messages) => messages.iter().map(|m| message_bytes(&m.content)).sum(),
        Prompt::Text(text) => text.len() as u64,
    }
}

/// The size of one chat message for [`TokenEstimator`]: its text and its role markers.
pub(crate) fn message_bytes(content: &str) -> u64 {
    content.len() as u64 + MESSAGE_OVERHEAD_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncalibrated_estimates_are_conservative() {
        let e = TokenEstimator::new();
        // 3 bytes per token: 300 bytes are 100 tokens, more than the 75 of 4 bytes per token.
        assert_eq!(e.estimate(300), 100);
    }

    #[test]
    fn calibrated_estimate_is_last_count_plus_growth() {
        let mut e = TokenEstimator::new();
        e.observe(4000, 1000);
        assert_eq!(e.bytes_per_token(), 4.0);
        assert_eq!(e.estimate(4400), 1100);
        // A smaller (fitted) prompt: its size at the rate.
        assert_eq!(e.estimate(2000), 500);
    }

    #[test]
    fn zero_counts_teach_nothing_and_odd_ones_are_bounded() {
        let mut e = TokenEstimator::new();
        e.observe(1000, 0);
        assert_eq!(e, TokenEstimator::new());
        e.observe(1_000_000, 1);
        assert_eq!(e.bytes_per_token(), 8.0);
    }
}
