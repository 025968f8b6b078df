//! The grammars an agent's turns are constrained with, built once when the agent is built.
//!
//! Four variants cover every turn: an ordinary step or the last turn at the step limit (a final
//! answer only), each for a model that answers straight away or one that reasons first. For a
//! reasoning model the whole-turn grammar allows a leading `<think>` block and a lazy grammar
//! (the decision alone, from `<action>` or `<final_answer>` on) is offered too, which llama.cpp
//! uses so that the reasoning stays free.
//!
//! After the loop guard refused a repeated call (docs/protocol.md §1.6), the next turn gets the
//! last turn's grammar: the model was just shown the result it keeps asking for, and can only
//! answer.
//!
//! A model reasons when [`AgentConfig::reasoning`](super::AgentConfig::reasoning) says so, or
//! from the first turn of a run in which it wrote a `<think>` block or the server sent separate
//! reasoning.

use std::sync::Arc;

use tracing::warn;

use crate::llm::{LazyGrammar, TurnGrammar};
use crate::protocol::{
    Grammar, LAZY_TRIGGERS, ToolShape, TurnShape, decision_grammar, parse_gbnf, turn_grammar,
};
use crate::tools::Registry;

use super::{Api, Role};

/// The grammars of one agent (none when its model takes none).
#[derive(Debug, Clone, Default)]
pub(crate) struct Grammars {
    /// `[step, last]` for a model that answers straight away.
    plain: Option<[Arc<TurnGrammar>; 2]>,
    /// `[step, last]` for a model that reasons first.
    reasoning: Option<[Arc<TurnGrammar>; 2]>,
}

/// What the grammar of a turn is built from.
pub(crate) struct GrammarInputs<'a> {
    pub(crate) tools: &'a Registry,
    pub(crate) role: &'a Role,
    pub(crate) api: Api,
}

impl GrammarInputs<'_> {
    /// The whole-turn grammar (for `tagloop prompt --show-grammar` and the live view).
    pub(crate) fn turn(&self, final_only: bool, think: bool) -> Grammar {
        turn_grammar(&self.shape(self.shapes(), final_only, think))
    }

    /// The tools as the grammar sees them.
    fn shapes(&self) -> Vec<ToolShape<'_>> {
        self.tools
            .iter()
            .map(|t| ToolShape {
                name: t.name(),
                parameters: t.parameters(),
            })
            .collect()
    }

    fn shape<'s>(
        &'s self,
        tools: Vec<ToolShape<'s>>,
        final_only: bool,
        think: bool,
    ) -> TurnShape<'s> {
        TurnShape {
            tools,
            output_schema: self.role.output_schema(),
            final_only,
            opened_thought: self.api == Api::Completions,
            think,
        }
    }

    /// One variant, checked.
    fn build(&self, final_only: bool, reasoning: bool) -> Option<Arc<TurnGrammar>> {
        let grammar = self.turn(final_only, reasoning);
        // Every variant follows the same schemas: say it once, from the ordinary step's
        // grammar (the one that holds the tools' parameters as well as the output schema).
        if !final_only && !reasoning {
            for part in grammar.simplified() {
                warn!(schema = %part.schema, pointer = %part.pointer, parts = part.parts,
                    "{part}; the model is sampled less strictly there, and its answer is still validated");
            }
        }
        let full = grammar.to_gbnf();
        let lazy = if reasoning {
            let g = decision_grammar(&self.shape(self.shapes(), final_only, false)).to_gbnf();
            Some(LazyGrammar {
                gbnf: g,
                triggers: if final_only {
                    vec![LAZY_TRIGGERS[1].to_string()]
                } else {
                    LAZY_TRIGGERS.iter().map(|t| t.to_string()).collect()
                },
            })
        } else {
            None
        };
        // A grammar that does not read back is never sent (llama.cpp may sample freely with it).
        for text in std::iter::once(&full).chain(lazy.as_ref().map(|l| &l.gbnf)) {
            if let Err(e) = parse_gbnf(text) {
                warn!(error = %e, "the turn grammar failed its own check; turns are not constrained");
                return None;
            }
        }
        Some(Arc::new(TurnGrammar { gbnf: full, lazy }))
    }
}

impl Grammars {
    /// Build every variant.
    pub(crate) fn build(inputs: &GrammarInputs<'_>) -> Self {
        let pair = |reasoning: bool| -> Option<[Arc<TurnGrammar>; 2]> {
            Some([
                inputs.build(false, reasoning)?,
                inputs.build(true, reasoning)?,
            ])
        };
        Grammars {
            plain: pair(false),
            reasoning: pair(true),
        }
    }

    /// The grammar for a turn.
    pub(crate) fn pick(&self, final_only: bool, reasoning: bool) -> Option<Arc<TurnGrammar>> {
        let set = if reasoning {
            &self.reasoning
        } else {
            &self.plain
        };
        set.as_ref().map(|s| s[usize::from(final_only)].clone())
    }
}
