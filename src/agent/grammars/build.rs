//! Building one set of grammars: the four variants of a turn, the decision alone and the
//! answer after a declined call, over the tools' parameters (their path parameters annotated)
//! and the paths a build allows.

use std::sync::Arc;

use serde_json::Value;
use tracing::warn;

use crate::llm::{LazyGrammar, TurnGrammar};
use crate::prompt::DECLINED_THOUGHT;
use crate::protocol::{
    KnownPaths, LAZY_TRIGGERS, PATH_ANNOTATION, ThoughtShape, ToolShape, TurnShape,
    decision_grammar_with, parse_gbnf, turn_grammar_with,
};
use crate::shown::Outside;
use crate::tools::{Registry, Workspace};

use super::super::Api;

/// The four variants, the decision alone, and the paths they were built with.
#[derive(Debug, Clone, Default)]
pub(super) struct Built {
    /// `[step, last]` for a model that answers straight away.
    pub(super) plain: Option<[Arc<TurnGrammar>; 2]>,
    /// `[step, last]` for a model that reasons first.
    pub(super) reasoning: Option<[Arc<TurnGrammar>; 2]>,
    /// `[step, last]`: the action or the final answer alone, from its opening tag on, for a turn
    /// that is continued after it never left its thought (`think.rs`).
    pub(super) decision: Option<[Arc<TurnGrammar>; 2]>,
    /// `[plain, reasoning]`: the answer after a declined call, its thought begun by the runtime.
    pub(super) declined: Option<[Arc<TurnGrammar>; 2]>,
    pub(super) known: KnownPaths,
}

/// The borrowed inputs of one build.
pub(super) struct Source<'a> {
    pub(super) tools: &'a Registry,
    pub(super) output_schema: Option<&'a Value>,
    pub(super) api: Api,
}

/// The workspace the registry's paths are relative to: the first tool's that has one.
pub(super) fn workspace(tools: &Registry) -> Option<&Workspace> {
    tools.iter().find_map(|t| t.workspace())
}

/// Each tool's parameters, with [`PATH_ANNOTATION`] on the properties it declares as paths
/// (the grammar reads the annotation; the schema the model is shown is not changed).
pub(super) fn annotated(tools: &Registry) -> Vec<Value> {
    tools
        .iter()
        .map(|t| {
            let mut params = t.parameters().clone();
            for (name, kind) in t.path_parameters() {
                if let Some(prop) = params
                    .get_mut("properties")
                    .and_then(|p| p.get_mut(&name))
                    .and_then(Value::as_object_mut)
                {
                    prop.insert(PATH_ANNOTATION.into(), Value::from(kind.as_str()));
                }
            }
            params
        })
        .collect()
}

impl Source<'_> {
    /// What one turn may hold, over `schemas` (the tools' parameters, annotated).
    pub(super) fn shape<'s>(
        &'s self,
        schemas: &'s [Value],
        final_only: bool,
        think: bool,
    ) -> TurnShape<'s> {
        let tools = (self.tools.iter().zip(schemas))
            .map(|(t, parameters)| ToolShape {
                name: t.name(),
                parameters,
            })
            .collect();
        TurnShape::new(tools)
            .output_schema(self.output_schema)
            .final_only(final_only)
            .opened_thought(self.api == Api::Completions)
            .think(think)
    }

    /// The decision alone (no thought before it), checked: a grammar that does not read back
    /// is never sent (llama.cpp may sample freely with it).
    fn decision(&self, schemas: &[Value], known: &KnownPaths, last: bool) -> Option<TurnGrammar> {
        let grammar = decision_grammar_with(&self.shape(schemas, last, false), known);
        let gbnf = grammar.to_gbnf();
        if let Err(e) = parse_gbnf(&gbnf) {
            warn!(error = %Outside(&e), "the decision grammar failed its own check; turns are not constrained");
            return None;
        }
        Some(TurnGrammar {
            gbnf,
            lark: Some(grammar.to_lark()),
            lazy: None,
        })
    }

    /// One variant, checked; `decision` is the same turn's decision alone (a reasoning model's
    /// lazy grammar).
    fn build(
        &self,
        schemas: &[Value],
        known: &KnownPaths,
        (final_only, reasoning): (bool, bool),
        thought: ThoughtShape<'_>,
        decision: &TurnGrammar,
    ) -> Option<Arc<TurnGrammar>> {
        let shape = self.shape(schemas, final_only, reasoning).thought(thought);
        let grammar = turn_grammar_with(&shape, known);
        // Every variant follows the same schemas: say it once, from the ordinary step's
        // grammar (the one that holds the tools' parameters as well as the output schema).
        if !final_only && !reasoning && thought == ThoughtShape::Free {
            for part in grammar.simplified() {
                warn!(schema = %Outside(&part.schema), pointer = %Outside(&part.pointer), parts = part.parts,
                    "{part}; the model is sampled less strictly there, and its answer is still validated");
            }
        }
        let gbnf = grammar.to_gbnf();
        if let Err(e) = parse_gbnf(&gbnf) {
            warn!(error = %Outside(&e), "the turn grammar failed its own check; turns are not constrained");
            return None;
        }
        let triggers = if final_only {
            &LAZY_TRIGGERS[1..]
        } else {
            &LAZY_TRIGGERS[..]
        };
        Some(Arc::new(TurnGrammar {
            gbnf,
            lark: Some(grammar.to_lark()),
            lazy: reasoning.then(|| LazyGrammar {
                gbnf: decision.gbnf.clone(),
                triggers: triggers.iter().map(|t| t.to_string()).collect(),
            }),
        }))
    }

    /// Every variant, with these paths.
    pub(super) fn build_all(&self, known: KnownPaths) -> Built {
        let schemas = annotated(self.tools);
        let decision = [false, true].map(|last| self.decision(&schemas, &known, last));
        let (free, begun) = (ThoughtShape::Free, ThoughtShape::Begun(DECLINED_THOUGHT));
        let variants = |reasoning: bool| -> Option<[Arc<TurnGrammar>; 2]> {
            let one = |last: bool| {
                let decision = decision[usize::from(last)].as_ref()?;
                self.build(&schemas, &known, (last, reasoning), free, decision)
            };
            Some([one(false)?, one(true)?])
        };
        let declined = |reasoning| {
            let last = decision[1].as_ref()?;
            self.build(&schemas, &known, (true, reasoning), begun, last)
        };
        Built {
            plain: variants(false),
            reasoning: variants(true),
            declined: declined(false).zip(declined(true)).map(<[_; 2]>::from),
            decision: match decision {
                [Some(step), Some(last)] => Some([Arc::new(step), Arc::new(last)]),
                _ => None,
            },
            known,
        }
    }
}
