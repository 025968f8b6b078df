//! The grammar in a request's body: whether this turn is constrained and how, and the field each
//! server takes it in.
//!
//! * **llama.cpp** takes `grammar` (GBNF) on `/completions` and `/chat/completions`, and lazy
//!   grammars: `grammar_lazy: true` with `grammar_triggers: [{"type": 1, "value": "<action>"},
//!   …]` (type 1 is a word), the trigger words also listed in `preserved_tokens` (llama.cpp
//!   refuses a one-token trigger word that is not). With llguidance stated it reads the Lark form
//!   from the same field.
//! * **vLLM** takes `structured_outputs: {"grammar": …}` (its `guided_grammar` is gone since
//!   0.12), **SGLang** `ebnf`; both hand the text to xgrammar, which reads GBNF.
//! * **Ollama**, **OpenAI** and the rest take no general grammar.

use serde_json::{Map, Value, json};

use super::OpenAiModel;
use crate::llm::{Constraint, GrammarMode, GrammarSyntax, ServerKind, TurnGrammar};

/// llama.cpp's trigger type for a word.
const TRIGGER_WORD: u8 = 1;

impl OpenAiModel {
    /// How this request's turn will be constrained, given the mode, the server and what the
    /// server refused before.
    pub(super) async fn constraint_for(&self, grammar: Option<&TurnGrammar>) -> Constraint {
        let Some(grammar) = grammar else {
            return Constraint::None;
        };
        if self.cfg.grammar == GrammarMode::Off || self.grammar_rejected() {
            return Constraint::None;
        }
        let kind = self.server_kind().await;
        let send = match self.cfg.grammar {
            GrammarMode::Auto => kind.takes_grammar(),
            GrammarMode::On => !kind.lacks_grammar(),
            GrammarMode::Off => false,
        };
        if !send {
            return Constraint::None;
        }
        if grammar.lazy.is_some() && matches!(kind, ServerKind::LlamaCpp | ServerKind::Other) {
            Constraint::LazyGrammar
        } else {
            Constraint::Grammar
        }
    }

    /// Put the grammar into a request body in the server's own field.
    pub(super) async fn add_grammar(
        &self,
        body: &mut Map<String, Value>,
        grammar: &TurnGrammar,
        constraint: Constraint,
    ) {
        if constraint == Constraint::None {
            return;
        }
        let kind = self.server_kind().await;
        match (constraint, &grammar.lazy) {
            (Constraint::None, _) => {}
            (Constraint::LazyGrammar, Some(lazy)) => {
                body.insert("grammar".into(), Value::String(lazy.gbnf.clone()));
                body.insert("grammar_lazy".into(), Value::Bool(true));
                let triggers: Vec<Value> = lazy
                    .triggers
                    .iter()
                    .map(|t| json!({"type": TRIGGER_WORD, "value": t}))
                    .collect();
                body.insert("grammar_triggers".into(), Value::Array(triggers));
                body.insert("preserved_tokens".into(), json!(lazy.triggers));
            }
            _ => match kind {
                ServerKind::Vllm => {
                    body.insert(
                        "structured_outputs".into(),
                        json!({ "grammar": grammar.gbnf }),
                    );
                }
                ServerKind::Sglang => {
                    body.insert("ebnf".into(), Value::String(grammar.gbnf.clone()));
                }
                _ => {
                    body.insert("grammar".into(), Value::String(grammar.gbnf.clone()));
                }
            },
        }
    }

    /// Whether this turn's grammar goes in llguidance's form: stated for the client, a whole-turn
    /// grammar that has one, a llama.cpp server (or one of unknown kind the user sends grammars
    /// to), and not refused before.
    pub(super) async fn sends_lark(&self, grammar: &TurnGrammar, constraint: Constraint) -> bool {
        self.cfg.grammar_syntax == GrammarSyntax::Llguidance
            && constraint == Constraint::Grammar
            && grammar.lark.is_some()
            && !self
                .lark_rejected
                .load(std::sync::atomic::Ordering::Relaxed)
            && matches!(
                self.server_kind().await,
                ServerKind::LlamaCpp | ServerKind::Other
            )
    }

    /// Put the Lark form in place of the GBNF text `add_grammar` wrote, when
    /// [`OpenAiModel::sends_lark`] says so (llama.cpp reads both from `grammar`).
    pub(super) async fn use_lark(
        &self,
        body: &mut Map<String, Value>,
        grammar: &TurnGrammar,
        constraint: Constraint,
    ) {
        if let Some(lark) = &grammar.lark
            && body.contains_key("grammar")
            && self.sends_lark(grammar, constraint).await
        {
            body.insert("grammar".into(), Value::String(lark.clone()));
        }
    }
}

/// Whether a 400 body complains about the grammar fields.
pub(super) fn names_grammar(body: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    ["grammar", "structured_outputs", "ebnf", "guided_"]
        .iter()
        .any(|w| lower.contains(w))
}
