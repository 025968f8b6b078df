//! The decision step before a run's first tool call: does the question need a tool at all?
//!
//! Small models call a tool for questions no file answers. On the project's suite Qwen2.5-Coder
//! 0.5B reads `garden/kites.yaml` (the system prompt's example then) to tell the capital of France,
//! and the 1.5B searches the workspace for `blue|yellow` to tell which colour the two paints
//! make, then answers from "no matches". So the first call of a fresh run is judged before it
//! runs, in two rules, the first one free:
//!
//! 1. **The question names the workspace**: a path (`docs/setup.md`, `notes.txt`, `docs/`: a
//!    path word as `path_words.rs` reads it, for `named.rs` too), a word for one (`file`,
//!    `folder`, `directory`, `workspace`…), or the name of an entry the workspace holds
//!    (`notes` when `notes.txt` is there; a workspace of at most a few hundred entries, as the
//!    grammars list it). Then the call is kept and nothing is asked.
//! 2. Otherwise **the model's own guess** (`guess.rs`, the request serve makes: the question
//!    alone, one snake_case name, at most 16 tokens): a guessed function that shares a content
//!    word with the called tool (its name, description, parameters) keeps the call; one that
//!    shares none (`get_capital` against `read_file`) declines it. A guess that cannot be had
//!    (the server fails the request), an answer that names no function, a name of stop
//!    words only (`get_value`), or one that says a word three times or more (a loop, no guess:
//!    `christian_christian_christian_…`) keeps it. A workspace question that names no file and
//!    whose guess is about something else than the tool is declined too: the rule favours
//!    answering when the question gives no sign that the files matter.
//!
//! Serve's rule differs in one way: there a guess that shares no word with the question keeps
//! the call (SmolLM2's unrelated guesses), because a client's tools are whatever the client
//! declared; a run's tools are the workspace's, and rule 1 already kept every question that
//! names it.
//!
//! A declined call is not run and not kept in the history: the same turn is asked again with
//! the answer-only grammar (the one of the last turn at the step limit). The step is taken only
//! where that grammar is sent (a model that takes none would write the same call again), once a
//! run, never in a continued one, and not at all with [`AgentConfig::decide`] off
//! (`--no-decide`). Each judgement is an [`Event::Decision`] in the events and the transcript.
//!
//! [`AgentConfig::decide`]: super::AgentConfig::decide

use std::collections::HashSet;

use tracing::warn;

use crate::policy::Policy;
use crate::protocol::{self, KnownPaths, Turn, TurnKind};
use crate::shown::Outside;
use crate::tools::{Tool, list_paths};

use super::events::Event;
use super::guess::request;
use super::run::Run;
use crate::policy::path_words;
use crate::policy::{Reading, content_words, name_of, reading, tool_words};

/// Words that name the workspace or a part of it.
const WORKSPACE_WORDS: &[&str] = &[
    "file",
    "files",
    "folder",
    "folders",
    "directory",
    "directories",
    "dir",
    "workspace",
    "path",
    "repository",
    "repo",
];

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
            || agent.grammars().pick(true, false).is_none()
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
        if names_workspace(&self.task, known.as_ref()) {
            self.emit(Event::Decision {
                tool: tool.name().to_string(),
                guess: None,
                declined: false,
                why: "the question names the workspace".into(),
            });
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
        let (declined, why) = verdict(guessed.as_deref(), tool.as_ref());
        self.emit(Event::Decision {
            tool: tool.name().to_string(),
            guess: guessed,
            declined,
            why,
        });
        declined
    }
}

/// Whether `question` names the workspace: a path, a word for one, or one of its entries.
pub(crate) fn names_workspace(question: &str, known: Option<&KnownPaths>) -> bool {
    let asked = content_words(question);
    let words: HashSet<String> = WORKSPACE_WORDS
        .iter()
        .flat_map(|w| content_words(w))
        .collect();
    if !asked.is_disjoint(&words) || !path_words(question).is_empty() {
        return true;
    }
    let Some(known) = known else { return false };
    known.files().iter().chain(known.dirs()).any(|p| {
        let name = p.rsplit('/').next().unwrap_or(p);
        let stem = name.split('.').next().unwrap_or(name);
        !content_words(stem).is_disjoint(&asked)
    })
}

/// The verdict on a call of `tool` given the guessed name: `(declined, why)`.
fn verdict(guessed: Option<&str>, tool: &dyn Tool) -> (bool, String) {
    let Some(guessed) = guessed else {
        return (false, "the model named no function for the question".into());
    };
    let guess = match reading(guessed) {
        Reading::Words(words) => words,
        Reading::Nothing => {
            return (
                false,
                format!("the model's own function, {guessed}, names nothing"),
            );
        }
        Reading::Repeats(word) => {
            return (
                false,
                format!(
                    "the model's own function, {guessed}, repeats the word {word}: no guess, the call is kept"
                ),
            );
        }
    };
    if !guess.is_disjoint(&tool_words(
        tool.name(),
        tool.description(),
        tool.parameters(),
    )) {
        return (
            false,
            format!(
                "the model's own function for the question, {guessed}, is about {}",
                tool.name()
            ),
        );
    }
    (
        true,
        format!(
            "the question names no file, and asked without the tools the model would call {guessed}, which shares no word with {}",
            tool.name()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_names_the_workspace_by_a_path_a_word_or_an_entry() {
        for q in [
            "Which port does docs/setup.md mention?",
            "What is the first line of notes.txt?",
            "How many files are in the docs folder?",
            "Which file contains a TODO comment?",
            "Search the workspace for the word 'port'.",
            "How old is Ana according to 'people.json'?",
            "What is in src/agent?",
            "What does the README.md say?",
        ] {
            assert!(names_workspace(q, None), "{q}");
        }
        for q in [
            "What is the capital of France?",
            "What is 12 times 12? Answer with the number only.",
            "Which colour do you get by mixing blue and yellow paint?",
            "What is 2.5 times 4?",
            // A fraction and an abbreviation are not paths (`path_words.rs`).
            "What is 1/2 plus 1/4?",
            "What is the capital of the U.S.?",
        ] {
            assert!(!names_workspace(q, None), "{q}");
        }
        let known = KnownPaths::new(vec!["config.toml".into()], vec![".".into(), "src".into()]);
        assert!(names_workspace("What does the config say?", Some(&known)));
        assert!(!names_workspace(
            "What is the capital of France?",
            Some(&known)
        ));
    }
}
