//! Whether serve's turns that may call begin with a thought (`--thought`).

use std::str::FromStr;

use crate::llm::Api;

/// Whether the upstream's turns that may call a tool begin with a `<thought>` (`--thought`),
/// in the protocol tool format (`--tool-format native` has its own turn).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ThoughtMode {
    /// The model's own thought, as in a run: optional under the grammar, and taught by the
    /// prompt's examples.
    Free,
    /// No thought (the default): the grammar begins the turn at its decision (`<action>` or
    /// `<final_answer>`), and the prompt's instructions and examples show none. A small
    /// model's thought there is mostly the prompt's example copied, while the call is judged
    /// by serve's guess; it costs 12–25 tokens before every call. Measured on BFCL (cases 0–9
    /// of eight categories, BENCHMARKS.md): the 0.5B Qwen 61/80 at 1.15× native llama.cpp's
    /// seconds, against 57/80 at 1.38× with the thought. The answer after a declined call
    /// keeps its thought begun in the runtime's words, and a turn that may only answer keeps
    /// the model's own (optional) thought.
    #[default]
    None,
}

impl ThoughtMode {
    /// Whether the prompts teach a thought before each decision.
    pub(crate) fn taught(self) -> bool {
        self == ThoughtMode::Free
    }

    /// Whether a turn's prompt under `api` already opened the thought: a completions document
    /// does when a thought is taught, and then the turn starts inside it.
    pub(crate) fn opened(self, api: Api) -> bool {
        api == Api::Completions && self.taught()
    }
}

impl FromStr for ThoughtMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "free" => Ok(ThoughtMode::Free),
            "none" => Ok(ThoughtMode::None),
            other => Err(format!(
                "unknown thought mode '{other}': expected free or none"
            )),
        }
    }
}
