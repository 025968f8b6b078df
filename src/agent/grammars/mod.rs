//! The grammars an agent's turns are constrained with, built at its first constrained turn and
//! again when the paths they allow change.
//!
//! Four variants cover every turn: an ordinary step or the last turn at the step limit (a final
//! answer only), each for a model that answers straight away or one that reasons first. For a
//! reasoning model the whole-turn grammar allows a leading `<think>` block and a lazy grammar
//! (the decision alone, from `<action>` or `<final_answer>` on) is offered too, which llama.cpp
//! uses so that the reasoning stays free.
//!
//! After the loop guard refused a repeated call (docs/protocol.md §1.6), the next turn gets the
//! last turn's grammar: the model was just shown the result it keeps asking for, and can only
//! answer. After a declined first call, the answer's thought begins as
//! [`DECLINED_THOUGHT`](crate::prompt::DECLINED_THOUGHT).
//!
//! Path-valued parameters (`read_file.path`, an MCP tool's `"x-tagloop-path"` property; see
//! [`Tool::path_parameters`](crate::tools::Tool::path_parameters)) are limited to the paths
//! that exist when the workspace is small ([`list_paths`]). Tools may change the workspace
//! (the write tools, `run_command`, MCP tools, another process), so before every turn the
//! workspace is listed again, a walk of at most a few hundred entries, and the grammars are
//! rebuilt only when the listing changed: a file created by one turn is callable in the next.
//!
//! A file the question names that the listing lacks (`logs/mail.log`, asked about a file that
//! is not there) is a path the grammar allows too, in that run only (`named.rs` says which
//! names and why). The last few builds are kept, each with the paths it allows, so that runs of
//! one agent that name different files do not rebuild each other's grammars every turn.
//!
//! A model reasons when [`AgentConfig::reasoning`](super::AgentConfig::reasoning) says so, or
//! from the first turn of a run in which it wrote a `<think>` block or the server sent separate
//! reasoning.

mod build;
mod named;

use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::llm::TurnGrammar;
use crate::protocol::{Grammar, turn_grammar_with};
use crate::tools::{Registry, Workspace, list_paths};

use super::{Api, Role};
use build::{Built, Source, annotated, workspace};
use named::with_named;

/// How many builds (each for one set of paths) an agent keeps.
const KEPT_BUILDS: usize = 8;

/// The grammars of one agent (none when its model takes none).
#[derive(Debug, Clone, Default)]
pub(crate) struct Grammars {
    /// The builds, the most recently used last (one alone when no parameter names a path).
    built: Arc<Mutex<Vec<Arc<Built>>>>,
    /// Where the paths come from, when some parameter names one (see the module docs).
    paths: Option<Arc<PathSource>>,
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
    /// the workspace's paths as they are now and the files a question names (`named`).
    pub(crate) fn turn<'n>(
        &self,
        final_only: bool,
        think: bool,
        named: impl IntoIterator<Item = &'n str>,
    ) -> Grammar {
        let known = workspace(self.tools)
            .and_then(|ws| Some(with_named(ws, list_paths(ws)?, named)))
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
            built: Arc::new(Mutex::new(vec![Arc::new(inputs.source().build_all(known))])),
            paths,
        }
    }

    /// The grammar for a turn of a run whose question names `named` files, rebuilt first when
    /// the paths changed since the last such turn.
    pub(crate) fn pick<'n>(
        &self,
        final_only: bool,
        reasoning: bool,
        named: impl IntoIterator<Item = &'n str>,
    ) -> Option<Arc<TurnGrammar>> {
        let built = self.current(named);
        let set = if reasoning {
            &built.reasoning
        } else {
            &built.plain
        };
        set.as_ref().map(|s| s[usize::from(final_only)].clone())
    }

    /// The grammar of the answer after a declined call (see the module docs).
    pub(crate) fn pick_declined<'n>(
        &self,
        reasoning: bool,
        named: impl IntoIterator<Item = &'n str>,
    ) -> Option<Arc<TurnGrammar>> {
        let set = self.current(named).declined.clone()?;
        Some(set[usize::from(reasoning)].clone())
    }

    /// The grammar of the decision alone (an action or the final answer, from its opening tag),
    /// for a turn continued after its thought (see `think.rs`).
    pub(crate) fn pick_decision<'n>(
        &self,
        final_only: bool,
        named: impl IntoIterator<Item = &'n str>,
    ) -> Option<Arc<TurnGrammar>> {
        let built = self.current(named);
        built
            .decision
            .as_ref()
            .map(|s| s[usize::from(final_only)].clone())
    }

    /// The grammars for the workspace's paths as they are now and the files the question
    /// names, built first when no kept build has those paths.
    fn current<'n>(&self, named: impl IntoIterator<Item = &'n str>) -> Arc<Built> {
        // A poisoned lock still holds grammars that were whole when they were built.
        let mut builds = self.built.lock().unwrap_or_else(|e| e.into_inner());
        let Some(p) = &self.paths else {
            return builds.first().cloned().unwrap_or_default();
        };
        let known = list_paths(&p.workspace)
            .map(|listed| with_named(&p.workspace, listed, named))
            .unwrap_or_default();
        if let Some(i) = builds.iter().position(|b| b.known == known) {
            let built = builds.remove(i);
            builds.push(built.clone());
            return built;
        }
        let source = Source {
            tools: &p.tools,
            output_schema: p.output_schema.as_ref(),
            api: p.api,
        };
        let built = Arc::new(source.build_all(known));
        if builds.len() >= KEPT_BUILDS {
            builds.remove(0);
        }
        builds.push(built.clone());
        built
    }
}
