//! A judgement of a turn's calls, as the transcript (`--session-dir`) records it: under
//! `tool_choice: auto`, the grounding rule (`grounding.rs`) and the model's own guess (`guess.rs`)
//! judge a first call, and each judgement of the guess, kept or declined, and each decline of
//! the grounding rule is one entry of the transcript's `decisions`, like a run's `decision`
//! event (`src/agent/events.rs`, which has one `tool`): the tools, the guess, whether the call
//! was declined and why. A reader sees why a call was kept, not
//! only why one was declined.

use serde::Serialize;

use super::Decision;
use super::ToolSpec;

/// One judgement of a turn's calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Judgement {
    /// The rule that judged: `grounding`, `guess` or `unsaid-optional`.
    pub rule: &'static str,
    /// The tools the turn called (the first call's, for the grounding rule).
    pub tools: Vec<String>,
    /// The function the model named for the question asked alone (`None`: not asked, not
    /// answered, or an answer with no name in it).
    pub guess: Option<String>,
    /// Whether the calls were declined (the turn asked again for an answer only).
    pub declined: bool,
    /// Why, in one sentence.
    pub why: String,
    /// The guess did not answer within its bound (`--guess-timeout`): the call went out
    /// unchecked.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// The guess answered before the turn's call and declined every declared tool: the turn
    /// was dropped unread and asked again for an answer only (`ahead.rs`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub before_call: bool,
}

impl Judgement {
    /// The grounding rule declined the turn's first call (`grounding.rs`), for `why`.
    pub(crate) fn ungrounded(decision: &Decision, why: &str) -> Self {
        let tools = match decision {
            Decision::Calls(calls) => calls.iter().take(1).map(|(n, _)| n.clone()).collect(),
            Decision::Answer { .. } => Vec::new(),
        };
        Judgement {
            rule: "grounding",
            tools,
            guess: None,
            declined: true,
            why: why.to_string(),
            timed_out: false,
            before_call: false,
        }
    }

    /// A guess about `called` that has not answered yet: what the transcript keeps when the
    /// request ends during the guess (its own time limit, or a client that left).
    pub(crate) fn unfinished(called: &[&ToolSpec]) -> Self {
        Judgement::guess(
            called,
            None,
            false,
            "the request ended (its --timeout ran out, or the client left) before the guess answered".into(),
        )
    }

    /// The guess's judgement of `called`.
    pub(crate) fn guess(
        called: &[&ToolSpec],
        guess: Option<String>,
        declined: bool,
        why: String,
    ) -> Self {
        Judgement {
            rule: "guess",
            tools: called.iter().map(|t| t.name.clone()).collect(),
            guess,
            declined,
            why,
            timed_out: false,
            before_call: false,
        }
    }

    /// Optional arguments of a kept call of `tool` that the conversation never gave, left out
    /// (`unsaid.rs`).
    pub(crate) fn left_out(tool: &str, args: &[String]) -> Self {
        Judgement {
            rule: "unsaid-optional",
            tools: vec![tool.to_string()],
            guess: None,
            declined: false,
            why: format!(
                "left out {tool}'s optional {} ({}): no value of the conversation's",
                if args.len() == 1 {
                    "argument"
                } else {
                    "arguments"
                },
                args.join(", ")
            ),
            timed_out: false,
            before_call: false,
        }
    }
}
