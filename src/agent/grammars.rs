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
//! answer. After a declined first call, the answer's thought begins as [`DECLINED_THOUGHT`].
//!
//! Path-valued parameters (`read_file.path`, an MCP tool's `"x-tagloop-path"` property; see
//! [`Tool::path_parameters`](crate::tools::Tool::path_parameters)) are limited to the paths
//! that exist when the workspace is small ([`list_paths`]). Tools may change the workspace
//! (the write tools, `run_command`, MCP tools, another process), so before every turn the
//! workspace is listed again, a walk of at most a few hundred entries, and the grammars are
//! rebuilt only when the listing changed: a file created by one turn is callable in the next.
//!
//! A model reasons when [`AgentConfig::reasoning`](super::AgentConfig::reasoning) says so, or
//! from the first turn of a run in which it wrote a `<think>` block or the server sent separate
//! reasoning.

use std::sync::{Arc, Mutex};

use serde_json::Value;
use tracing::warn;

use crate::llm::{LazyGrammar, TurnGrammar};
use crate::prompt::DECLINED_THOUGHT;
use crate::protocol::{
    Grammar, KnownPaths, LAZY_TRIGGERS, PATH_ANNOTATION, ThoughtShape, ToolShape, TurnShape,
    decision_grammar_with, parse_gbnf, turn_grammar_with,
};
use crate::tools::{Registry, Workspace, list_paths};

use super::{Api, Role};
use crate::shown::Outside;

/// The grammars of one agent (none when its model takes none).
#[derive(Debug, Clone, Default)]
pub(crate) struct Grammars {
    built: Arc<Mutex<Built>>,
    /// Where the paths come from, when some parameter names one (see the module docs).
    paths: Option<Arc<PathSource>>,
}

/// The four variants, the decision alone, and the paths they were built with.
#[derive(Debug, Clone, Default)]
struct Built {
    /// `[step, last]` for a model that answers straight away.
    plain: Option<[Arc<TurnGrammar>; 2]>,
    /// `[step, last]` for a model that reasons first.
    reasoning: Option<[Arc<TurnGrammar>; 2]>,
    /// `[step, last]`: the action or the final answer alone, from its opening tag on, for a turn
    /// that is continued after it never left its thought (`think.rs`).
    decision: Option<[Arc<TurnGrammar>; 2]>,
    /// `[plain, reasoning]`: the answer after a declined call, its thought begun by the runtime.
    declined: Option<[Arc<TurnGrammar>; 2]>,
    known: KnownPaths,
}

/// What the grammars are rebuilt from when the workspace's paths change.
#[derive(Debug)]
struct PathSource {
    workspace: Workspace,
    tools: Registry,
    output_schema: Option<Value>,
    api: Api,
}

/// What the grammar of a turn is built from.
pub(crate) struct GrammarInputs<'a> {
    pub(crate) tools: &'a Registry,
    pub(crate) role: &'a Role,
    pub(crate) api: Api,
}

impl GrammarInputs<'_> {
    /// The whole-turn grammar (for `tagloop prompt --show-grammar` and the live view), with
    /// the workspace's paths as they are now.
    pub(crate) fn turn(&self, final_only: bool, think: bool) -> Grammar {
        let known = workspace(self.tools)
            .and_then(list_paths)
            .unwrap_or_default();
        let schemas = annotated(self.tools);
        turn_grammar_with(&self.source().shape(&schemas, final_only, think), &known)
    }

    fn source(&self) -> Source<'_> {
        Source {
            tools: self.tools,
            output_schema: self.role.output_schema(),
            api: self.api,
        }
    }
}

/// The borrowed inputs of one build.
struct Source<'a> {
    tools: &'a Registry,
    output_schema: Option<&'a Value>,
    api: Api,
}

/// The workspace the registry's paths are relative to: the first tool's that has one.
fn workspace(tools: &Registry) -> Option<&Workspace> {
    tools.iter().find_map(|t| t.workspace())
}

/// Each tool's parameters, with [`PATH_ANNOTATION`] on the properties it declares as paths
/// (the grammar reads the annotation; the schema the model is shown is not changed).
fn annotated(tools: &Registry) -> Vec<Value> {
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
    fn shape<'s>(&'s self, schemas: &'s [Value], final_only: bool, think: bool) -> TurnShape<'s> {
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
    fn build_all(&self, known: KnownPaths) -> Built {
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

impl Grammars {
    /// Build every variant, with the workspace's paths as they are now.
    pub(crate) fn build(inputs: &GrammarInputs<'_>) -> Self {
        let has_paths = inputs.tools.iter().any(|t| !t.path_parameters().is_empty());
        let paths = workspace(inputs.tools).filter(|_| has_paths).map(|ws| {
            Arc::new(PathSource {
                workspace: ws.clone(),
                tools: inputs.tools.clone(),
                output_schema: inputs.role.output_schema().cloned(),
                api: inputs.api,
            })
        });
        let known = paths
            .as_ref()
            .and_then(|p| list_paths(&p.workspace))
            .unwrap_or_default();
        Grammars {
            built: Arc::new(Mutex::new(inputs.source().build_all(known))),
            paths,
        }
    }

    /// The grammar for a turn, rebuilt first when the workspace's paths changed since the
    /// last one.
    pub(crate) fn pick(&self, final_only: bool, reasoning: bool) -> Option<Arc<TurnGrammar>> {
        let built = self.current();
        let set = if reasoning {
            &built.reasoning
        } else {
            &built.plain
        };
        set.as_ref().map(|s| s[usize::from(final_only)].clone())
    }

    /// The grammar of the answer after a declined call (see the module docs).
    pub(crate) fn pick_declined(&self, reasoning: bool) -> Option<Arc<TurnGrammar>> {
        let set = self.current().declined.clone()?;
        Some(set[usize::from(reasoning)].clone())
    }

    /// The grammar of the decision alone (an action or the final answer, from its opening tag),
    /// for a turn continued after its thought (see `think.rs`).
    pub(crate) fn pick_decision(&self, final_only: bool) -> Option<Arc<TurnGrammar>> {
        let built = self.current();
        built
            .decision
            .as_ref()
            .map(|s| s[usize::from(final_only)].clone())
    }

    /// The grammars, rebuilt first when the workspace's paths changed since the last turn.
    fn current(&self) -> std::sync::MutexGuard<'_, Built> {
        // A poisoned lock still holds grammars that were whole when they were built.
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = &self.paths {
            let known = list_paths(&p.workspace).unwrap_or_default();
            if known != built.known {
                let source = Source {
                    tools: &p.tools,
                    output_schema: p.output_schema.as_ref(),
                    api: p.api,
                };
                *built = source.build_all(known);
            }
        }
        built
    }
}
