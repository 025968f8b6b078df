//! Grammar-constrained turns, as far as model clients are concerned: the grammar a request
//! carries, whether to send it, and how a turn was constrained in the end (which server is on
//! the other end is `crate::upstream`'s).

use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The grammar of one turn, in GBNF (llama.cpp's format, which vLLM's and SGLang's xgrammar
/// read as well).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnGrammar {
    /// The whole turn, from its first character.
    pub gbnf: String,
    /// The same grammar in llguidance's Lark syntax (it starts with `%llguidance {}`), sent
    /// instead of `gbnf` to llama.cpp when [`GrammarSyntax::Llguidance`] is stated; `None`:
    /// GBNF only.
    pub lark: Option<String>,
    /// For models that reason freely first: the grammar of the decision alone and the words
    /// that start it (llama.cpp's lazy grammars). `None` when the model is not known to reason.
    pub lazy: Option<LazyGrammar>,
}

/// A grammar that applies from the first trigger word on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LazyGrammar {
    /// The grammar, starting at a trigger word.
    pub gbnf: String,
    /// The words that start it (`<action>`, `<final_answer>`).
    pub triggers: Vec<String>,
}

/// Whether to constrain turns with a grammar (`--grammar`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrammarMode {
    /// On servers known to take a grammar (llama.cpp, vLLM, SGLang), detected or stated.
    #[default]
    Auto,
    /// On every server not known to lack grammars (unknown servers get llama.cpp's field).
    On,
    /// Never.
    Off,
}

impl GrammarMode {
    /// `auto`, `on` or `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            GrammarMode::Auto => "auto",
            GrammarMode::On => "on",
            GrammarMode::Off => "off",
        }
    }
}

impl FromStr for GrammarMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(GrammarMode::Auto),
            "on" | "true" | "yes" => Ok(GrammarMode::On),
            "off" | "false" | "no" => Ok(GrammarMode::Off),
            other => Err(format!(
                "unknown grammar mode '{other}': expected auto, on or off"
            )),
        }
    }
}

/// Which grammar syntax a llama.cpp server is sent (`--grammar-syntax`, `grammar_syntax`).
///
/// llama.cpp built with `-DLLAMA_LLGUIDANCE=ON` hands a grammar that starts with
/// `%llguidance` to llguidance, whose token masks cost tens of microseconds where its own GBNF
/// sampler's cost milliseconds. A build without it does not refuse such a grammar: it aborts
/// the whole server (`GGML_ABORT("llguidance (cmake -DLLAMA_LLGUIDANCE=ON) is not enabled")`
/// in `common/sampling.cpp`; llama.cpp issue 25960). Nothing the server publishes says which
/// build it is, so llguidance is never tried on a guess: it is used only when stated. Other
/// servers always get GBNF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum GrammarSyntax {
    /// GBNF, which every llama.cpp takes.
    #[default]
    Gbnf,
    /// llguidance's Lark form, for a llama.cpp the user knows was built with llguidance. A
    /// server that answers 400 naming the grammar is asked again in GBNF, and the client
    /// sends GBNF from then on.
    Llguidance,
}

impl GrammarSyntax {
    /// `gbnf` or `llguidance`.
    pub fn as_str(self) -> &'static str {
        match self {
            GrammarSyntax::Gbnf => "gbnf",
            GrammarSyntax::Llguidance => "llguidance",
        }
    }
}

impl FromStr for GrammarSyntax {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "gbnf" => Ok(GrammarSyntax::Gbnf),
            "llguidance" | "lark" => Ok(GrammarSyntax::Llguidance),
            other => Err(format!(
                "unknown grammar syntax '{other}': expected gbnf or llguidance"
            )),
        }
    }
}

/// How a turn was constrained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Constraint {
    /// Sampled freely.
    #[default]
    None,
    /// The whole turn followed the grammar.
    Grammar,
    /// Free until a trigger word, the grammar after it.
    LazyGrammar,
}

impl Constraint {
    /// Whether any grammar applied.
    pub fn is_constrained(self) -> bool {
        self != Constraint::None
    }
}
