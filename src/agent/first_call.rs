//! The decision step before a run's first tool call (policy `decide`): when it is taken, the
//! guess's request, and the answer-only turn after a decline. What it judges and why is the
//! decision room's (`crate::policy::decide`, whose docs give both rules); the guess's request is
//! the one serve sends (`guess.rs`).
//!
//! A declined call is not run and not kept in the history: the same turn is asked again with
//! the answer-only grammar (the one of the last turn at the step limit). The step is taken only
//! where that grammar is sent (a model that takes none would write the same call again), once a
//! run, never in a continued one, and not at all with [`AgentConfig::decide`] off
//! (`--policy-off decide`). Each judgement is an [`Event::Decision`] in the events and the transcript.
//!
//! [`AgentConfig::decide`]: super::AgentConfig::decide

use tracing::warn;

use crate::policy::{Choice, Entry, Judgement, Policy, ToolSpec, View, decide, name_of};
use crate::protocol::{self, Turn, TurnKind};
use crate::shown::Outside;
use crate::tools::list_paths;

use super::events::Event;
use super::guess::request;
use super::run::Run;

impl Run<'_> {
    /// Judge the run's first call (see the module docs): true when it is declined and the turn
    /// must be asked again answer-only.
    pub(super) async fn first_call_declined(&mut self, turn: &Turn) -> bool {
        let agent = self.agent;
        if turn.kind != TurnKind::Action
            || self.memory.decided
            || !agent.config.decide
            || !agent.config.policies.on(Policy::Decide)
            || self.progress.steps > 0
            || agent
                .grammars()
                .pick(true, false, self.memory.named.names())
                .is_none()
        {
            return false;
        }
        // Judged once: its `Decision` event marks it in the run's memory. A call that cannot be
        // read, or whose guess fails, leaves no event; it is a counted step, after which the
        // decision step never judges.
        let tools = &agent.tools;
        let accept = |c: &protocol::Call| tools.get(&c.tool).is_some();
        let action = turn.action.as_deref().unwrap_or_default();
        // A call that cannot be read or names no tool is the correction's to handle.
        let Some(tool) = protocol::parse_action_with(action, &accept)
            .ok()
            .and_then(|call| tools.get(&call.tool).cloned())
        else {
            return false;
        };
        let known = tool.workspace().and_then(list_paths);
        // The rule reads the run as a view: its question, and of its tools the called one (the
        // only one it reads; a schema is compiled for it alone).
        let Some(called) = ToolSpec::of_run(tool.name(), tool.description(), tool.parameters())
        else {
            return false;
        };
        let question = [Entry::Question(self.task.clone())];
        let view = View::new("", &question, std::slice::from_ref(&called), Choice::Auto);
        let called = &called;
        if let Some(kept) = decide::unasked(&view, called, known.as_ref()) {
            self.judged(kept);
            return false;
        }
        let request = request(&self.task, agent.config.api, true);
        let guessed = match agent.model.turn(&request, &mut |_| {}).await {
            Ok(result) => {
                self.requests += 1;
                self.progress.usage.add(result.usage);
                name_of(&result.text)
            }
            Err(e) => {
                warn!(error = %Outside(&e), "the guess at the question's function failed; the call is kept");
                return false;
            }
        };
        let judged = decide::by_guess(&view, called, guessed);
        let declined = judged.declined;
        self.judged(judged);
        declined
    }

    /// The decision step's judgement, as the run's `decision` event.
    fn judged(&mut self, j: Judgement) {
        self.emit(Event::Decision {
            tool: j.tools.into_iter().next().unwrap_or_default(),
            guess: j.guess,
            declined: j.declined,
            why: j.why,
        });
    }
}
