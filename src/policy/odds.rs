//! The call's own odds: a first call whose tool name the model itself gave low odds is declined
//! (the `call-odds` policy).
//!
//! Under serve's grammar a turn that calls must write one of the declared tools' names after
//! `<action>`, whatever the model would have written there. llama.cpp reports each sampled
//! token's log-probability under the model's own distribution, before the grammar narrowed it.
//! So when the question asks for something no declared tool does, the model is made to write a
//! name it would not have chosen, and its own odds of the name's tokens say so: asked for a
//! triangle's area with only `determine_body_mass_index` declared, Qwen2.5-Coder-0.5B writes
//! the name at once, but token by token it would rather have written another. No word of the
//! question or the tool is read: it is the model's judgement, with the tools in view.
//!
//! The score is the mean log-probability of the tokens between `<action>` and the call's `(`.
//! Calibrated on BFCL's dev cases only (`bench/bfcl/branch_calibrate.py --measure name`,
//! docs/experiments.md): on the 0.5B, 56 right first calls (simple_python 0–24, multiple 0–15,
//! live_simple 0–14) all score above [`DECLINE_BELOW`], and 23 of 30 questions no tool answers
//! (irrelevance and live_irrelevance 0–14) below it (separation, AUC, 0.94). The odds of the
//! branch itself (`<action>` against `<final_answer>`) did not separate at all (AUC 0.48). On
//! the 1.5B the same cut keeps its 24 right dev calls (cases 0–7; none below −0.17) and declines
//! 13 of 15 irrelevant ones (AUC 0.98): one cut for the family.
//!
//! Judged as the guess is: a turn of calls right after a user message under `tool_choice:
//! auto` (`guess::judged`), on the turn as the model wrote it (not a re-ask's, not a turn
//! continued from a cut). Serve asks for the odds only where its grammar went to the server
//! (a server it knows takes one) and over the chat API; a turn without them (a server that
//! sends none) is kept: no score, no verdict.

use super::Judgement;
use super::ToolSpec;

/// A first call whose name scores below this (a mean, in nats) is declined.
pub(crate) const DECLINE_BELOW: f64 = -0.5;

/// The mean log-probability of the first call's name: the tokens after the first `<action>`
/// up to the one that writes `(`; `None` when the turn has no such name.
pub(crate) fn name_odds<'t>(tokens: impl IntoIterator<Item = (&'t str, f64)>) -> Option<f64> {
    const OPEN: &str = "<action>";
    let mut text = String::new();
    let mut start: Option<usize> = None;
    let (mut sum, mut count) = (0.0, 0u32);
    for (token, logprob) in tokens {
        let at = text.len();
        text.push_str(token);
        let Some(from) = start else {
            start = text.find(OPEN).map(|i| i + OPEN.len());
            continue;
        };
        if at < from {
            continue;
        }
        if token.contains('(') {
            break;
        }
        sum += logprob;
        count += 1;
    }
    (count > 0).then(|| sum / f64::from(count))
}

/// The judgement of the `called` tools by their name's odds: declined below
/// [`DECLINE_BELOW`].
pub(crate) fn judgement(called: &[&ToolSpec], odds: f64) -> Judgement {
    let names = called
        .iter()
        .map(|t| t.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let declined = odds < DECLINE_BELOW;
    let why = if declined {
        format!(
            "declined: the model's own odds of writing {names} were low (mean log-probability {odds:.2} < {DECLINE_BELOW})"
        )
    } else {
        format!("the model's own odds of writing {names}: mean log-probability {odds:.2}")
    };
    Judgement {
        rule: "call-odds",
        tools: called.iter().map(|t| t.name.clone()).collect(),
        guess: None,
        declined,
        why,
        timed_out: false,
        before_call: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn odds(tokens: &[(&str, f64)]) -> Option<f64> {
        name_odds(tokens.iter().copied())
    }

    #[test]
    fn the_score_is_the_mean_of_the_name_tokens_only() {
        // As llama.cpp names the tokens under a grammar: the "<" comes as an empty piece, then
        // "<action" (the same text in the end).
        let tokens = [
            ("", -0.07),
            ("<action", -0.08),
            (">", -0.2),
            ("determine", -3.0),
            ("_body", -1.0),
            ("_mass_index", -0.5),
            ("(weight", -0.01),
            ("=10)", -0.01),
        ];
        let score = odds(&tokens).unwrap();
        assert!((score - (-1.5)).abs() < 1e-9, "{score}");
        // Split tags, and the name's last piece sharing its token with the parenthesis.
        let tokens = [
            ("<", -0.1),
            ("action", -0.1),
            (">", -0.1),
            ("area", -0.25),
            ("_of(", -4.0),
        ];
        assert_eq!(odds(&tokens), Some(-0.25));
    }

    #[test]
    fn a_turn_with_no_call_or_no_odds_has_no_score() {
        assert_eq!(odds(&[]), None);
        assert_eq!(
            odds(&[
                ("<final_answer>", -0.1),
                ("Paris", -0.2),
                ("</final_answer>", -0.1)
            ]),
            None
        );
        assert_eq!(odds(&[("<action>", -0.1), ("(", -0.1)]), None);
    }
}
