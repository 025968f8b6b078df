//! The context policy: whether a run fits its requests into the model's window, and the sizes
//! that decide how.

/// Whether requests are fitted into the model's context window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ContextMode {
    /// Send the whole history every turn, as it is (the server refuses or cuts what is too long).
    Off,
    /// Before every request, shrink the history (and then the turn's token budget) so that the
    /// prompt and the turn fit the window; a run that cannot fit even then ends with
    /// [`Status::ContextExceeded`](crate::agent::Status::ContextExceeded). The default.
    #[default]
    Fit,
}

/// How a run keeps its requests inside the model's context window (see
/// [`Model::context_window`](crate::llm::Model::context_window)). Nothing is fitted when the
/// window is unknown, whatever the mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextPolicy {
    /// Fit or not ([`ContextMode::Fit`] by default).
    pub mode: ContextMode,
    /// The smallest token budget an ordinary turn may be given when the budget shrinks to what
    /// the window has left (256 by default). Below it, the run gets one final-answer-only turn if
    /// [`ContextPolicy::final_tokens`] still fit, then ends with `context_exceeded`.
    pub min_turn_tokens: u32,
    /// The smallest budget of that last, final-answer-only turn (128 by default).
    pub final_tokens: u32,
    /// Tokens kept free beyond prompt and budget, for what an estimate may miss (the chat
    /// template's own tokens, a tokenizer that counts differently): 64 by default. After the
    /// server refused a prompt as too long, the retry keeps four times this plus a tenth of the
    /// window free.
    pub margin_tokens: u32,
    /// The last steps (turn and observation) always sent whole: at least 1 (the default).
    pub keep_last_steps: usize,
    /// A run whose window is smaller than this many tokens sends the system prompt's compact form
    /// (one example, one line per tool): 4,096 by default, so llama.cpp's `-c 2048` gets it; 0
    /// never does. At 2,048 tokens the whole prompt takes nearly half the window before the
    /// first turn.
    pub compact_prompt_below: u64,
}

impl Default for ContextPolicy {
    fn default() -> Self {
        ContextPolicy {
            mode: ContextMode::Fit,
            min_turn_tokens: 256,
            final_tokens: 128,
            margin_tokens: 64,
            keep_last_steps: 1,
            compact_prompt_below: 4096,
        }
    }
}

impl ContextPolicy {
    /// A policy that never fits (today's behaviour before fitting existed).
    pub fn off() -> Self {
        ContextPolicy {
            mode: ContextMode::Off,
            ..ContextPolicy::default()
        }
    }

    /// Whether requests are fitted at all.
    pub fn fits(&self) -> bool {
        self.mode == ContextMode::Fit
    }
}
