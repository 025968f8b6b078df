//! What the core is given besides a request ([`Core`]: the upstream, the templates, the rules
//! on) and what it says it cost ([`Trace`]): shared by the answer loop (`answer.rs`), its seat
//! in the turn engine (`seat.rs`), the faces and the transcript.

use crate::llm::{Api, Model, Usage};
use crate::policy::{Judgement, Policies};
use crate::prompt::Templates;
use crate::secret::Redactor;

use super::thought::ThoughtMode;

/// What answering a request cost, for the log line and the transcript.
#[derive(Debug, Clone, Default)]
pub(crate) struct Trace {
    /// Upstream requests made (repairs included).
    pub requests: u32,
    /// Their usage, summed.
    pub usage: Usage,
    /// The turns the upstream wrote, in order, and the correction each refused one got.
    pub turns: Vec<(String, Option<String>)>,
    /// Each judgement of a turn's calls, kept or declined (`policy/judgement.rs`).
    pub decisions: Vec<Judgement>,
    /// What context fitting left out of each upstream request it shortened (`fit.rs`).
    pub fitted: Vec<serde_json::Value>,
    /// The request's log line is written elsewhere (a streamed answer's task writes it when
    /// the stream ends).
    pub logged: bool,
}

/// What the core needs besides the request.
pub(crate) struct Core<'a> {
    pub model: &'a dyn Model,
    pub api: Api,
    pub templates: &'a Templates,
    pub repairs: u32,
    /// The upstream key, taken out of what the core says about a turn (a refusal quotes it).
    pub redactor: &'a Redactor,
    /// The model's own tool format, when serve asks in it (`native/`, `--tool-format`).
    pub native: Option<std::sync::Arc<super::native::NativeFormat>>,
    /// The guess's own time limit (`policy/guess.rs`; `None`: the request's).
    pub guess_timeout: Option<std::time::Duration>,
    /// Whether the turns that may call begin with a thought (`--thought`, `thought.rs`).
    pub thought: ThoughtMode,
    /// The steering rules on (`crate::policy`; each site below asks it).
    pub policies: Policies,
}
