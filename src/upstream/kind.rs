//! Which server is behind the base URL ([`ServerKind`]), and what its detection learned
//! ([`Detected`]); the detection itself asks the server (`detect.rs`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The kind of server behind an OpenAI-compatible URL, as far as grammars go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServerKind {
    /// llama.cpp's `llama-server`: `grammar` (GBNF), lazy grammars with triggers.
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    /// vLLM: `structured_outputs.grammar`.
    #[serde(rename = "vllm")]
    Vllm,
    /// SGLang: `ebnf`.
    #[serde(rename = "sglang")]
    Sglang,
    /// Ollama: no general grammar.
    #[serde(rename = "ollama")]
    Ollama,
    /// OpenAI and other hosted APIs without grammars.
    #[serde(rename = "openai")]
    OpenAi,
    /// Anything else.
    #[serde(rename = "other")]
    Other,
}

impl ServerKind {
    /// The name used in options, configs and events.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerKind::LlamaCpp => "llama.cpp",
            ServerKind::Vllm => "vllm",
            ServerKind::Sglang => "sglang",
            ServerKind::Ollama => "ollama",
            ServerKind::OpenAi => "openai",
            ServerKind::Other => "other",
        }
    }

    /// Whether the server is known to constrain sampling to a grammar.
    pub fn takes_grammar(self) -> bool {
        matches!(
            self,
            ServerKind::LlamaCpp | ServerKind::Vllm | ServerKind::Sglang
        )
    }

    /// Whether the server is known to take no grammar at all.
    pub fn lacks_grammar(self) -> bool {
        matches!(self, ServerKind::Ollama | ServerKind::OpenAi)
    }
}

impl fmt::Display for ServerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ServerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "llama.cpp" | "llamacpp" | "llama-cpp" | "llama-server" => Ok(ServerKind::LlamaCpp),
            "vllm" => Ok(ServerKind::Vllm),
            "sglang" => Ok(ServerKind::Sglang),
            "ollama" => Ok(ServerKind::Ollama),
            "openai" => Ok(ServerKind::OpenAi),
            "other" => Ok(ServerKind::Other),
            other => Err(format!(
                "unknown server kind '{other}': expected llama.cpp, vllm, sglang, ollama, openai or other"
            )),
        }
    }
}

/// What the detection learned from the server's answers: its kind, and its context window when
/// the same answers said it (llama.cpp's `/props`, vLLM's and SGLang's `max_model_len`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Detected {
    pub(super) kind: ServerKind,
    pub(super) window: Option<u64>,
}
