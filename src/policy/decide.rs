//! `decide`: the decision step before a run's first tool call: does the question need a tool at
//! all?
//!
//! Small models call a tool for questions no file answers. On the project's suite Qwen2.5-Coder
//! 0.5B reads `garden/kites.yaml` (the system prompt's example then) to tell the capital of France,
//! and the 1.5B searches the workspace for `blue|yellow` to tell which colour the two paints
//! make, then answers from "no matches". So the first call of a fresh run is judged before it
//! runs, in two rules, the first one free:
//!
//! 1. **The question names the workspace** ([`names_workspace`]): a path (`docs/setup.md`,
//!    `notes.txt`, `docs/`: a path word as `path_words.rs` reads it, for `named.rs` too), a word
//!    for one (`file`, `folder`, `directory`, `workspace`…), or the name of an entry the
//!    workspace holds (`notes` when `notes.txt` is there; a workspace of at most a few hundred
//!    entries, as the grammars list it). Then the call is kept and nothing is asked.
//! 2. Otherwise **the model's own guess**, the request serve's `guess` sends too
//!    (`src/agent/guess.rs`), judged by the same verdict (`guess.rs`, [`Asker::Run`]): a guessed
//!    function that shares a content word with the called tool (its name, description,
//!    parameters) keeps the call; one that shares none (`get_capital` against `read_file`)
//!    declines it. A guess that cannot be had (the server fails the request), an answer that
//!    names no function, a name of stop words only (`get_value`), or one that says a word three
//!    times or more (a loop, no guess) keeps it.
//!
//! Serve's verdict differs in one way, given as the [`Asker`]: there a guess that shares no word
//! with the question keeps the call (SmolLM2's unrelated guesses), because a client's tools are
//! whatever the client declared; a run's tools are the workspace's, and rule 1 already kept
//! every question that names it.
//!
//! The step itself (when it is taken, the request, the answer-only turn after a decline) is the
//! agent's (`src/agent/first_call.rs`); this file judges. Its judgements have serve's
//! [`Judgement`] shape, rule `decide`, and become the run's `decision` events.

use std::collections::HashSet;

use crate::protocol::KnownPaths;

use super::guess::{Asker, Verdict, verdict_for};
use super::words::content_words;
use super::{Judgement, ToolSpec, View, path_words};

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

/// Rule 1 on a run's first call of `called`: the judgement that keeps it unasked when the
/// question (the view's first) names the workspace whose entries are `known`, else `None` (the
/// guess must be asked).
pub(crate) fn unasked(
    view: &View<'_>,
    called: &ToolSpec,
    known: Option<&KnownPaths>,
) -> Option<Judgement> {
    names_workspace(view.question(), known).then(|| {
        judgement(
            called,
            None,
            false,
            "the question names the workspace".into(),
        )
    })
}

/// Rule 2: the judgement of a run's first call of `called` by the name the model guessed for
/// the question (`None`: its answer named none).
pub(crate) fn by_guess(view: &View<'_>, called: &ToolSpec, guessed: Option<String>) -> Judgement {
    let Some(name) = guessed else {
        return judgement(
            called,
            None,
            false,
            "the model named no function for the question".into(),
        );
    };
    let (declined, why) = match verdict_for(Asker::Run, view.question(), &name, &[called]) {
        Verdict::Keep(why) => (false, why),
        Verdict::Decline(why) => (true, why),
    };
    judgement(called, Some(name), declined, why)
}

fn judgement(called: &ToolSpec, guess: Option<String>, declined: bool, why: String) -> Judgement {
    Judgement {
        rule: "decide",
        ..Judgement::guess(&[called], guess, declined, why)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Choice, Entry};
    use serde_json::json;

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

    #[test]
    fn a_run_judges_every_guess_with_words_even_one_the_question_never_says() {
        let read = ToolSpec::of_run(
            "read_file",
            "Read a text file of the workspace.",
            &json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        )
        .unwrap();
        let conversation = [Entry::Question("What is the capital of France?".into())];
        let view = View::new("", &conversation, std::slice::from_ref(&read), Choice::Auto);
        assert!(unasked(&view, &read, None).is_none());
        let j = by_guess(&view, &read, Some("get_capital".into()));
        assert!(j.declined && j.rule == "decide", "{j:?}");
        assert_eq!(j.tools, ["read_file"]);
        // Serve would keep this one (its words are not the question's); a run declines it.
        let j = by_guess(&view, &read, Some("process_data".into()));
        assert!(j.declined, "{j:?}");
        assert!(!by_guess(&view, &read, Some("read_text_file".into())).declined);
        assert!(!by_guess(&view, &read, Some("get_value".into())).declined);
        assert!(!by_guess(&view, &read, None).declined);
        // A schema the validator refuses (an MCP server's) still gives a tool to judge.
        let odd = ToolSpec::of_run("read_file", "Read a file.", &json!({"type": 12})).unwrap();
        assert!(by_guess(&view, &odd, Some("get_capital".into())).declined);
        let conversation = [Entry::Question("What is in notes.txt?".into())];
        let view = View::new("", &conversation, std::slice::from_ref(&read), Choice::Auto);
        let j = unasked(&view, &read, None).unwrap();
        assert!(!j.declined && j.guess.is_none(), "{j:?}");
    }
}
