//! The model's own choice among the declared tools and "none", read by its odds: serve's check
//! of a first call where the client gave a cut (`--choice-cut MARGIN`), issue 43 item 4.
//!
//! The lexical rules (`grounding.rs`, `guess.rs`) judge a call by the words it shares with the
//! question; a real request that spells out a command for a tool named after an API shares
//! none. This asks the model instead. Beside the first turn, serve sends the turn's own prompt
//! (its system prompt with the tools, the conversation) with the question followed by [`ASK`],
//! for one token, with the [`TOP`] most likely first tokens and their log-probabilities
//! (`serve/ahead.rs`). Everything before the ask is the turn's prompt, so a server's prompt
//! cache (llama-server's) holds it from the turn: the check costs the ask's few tokens.
//!
//! Its reading is a margin, [`margin`]: ln P(the reply begins a declared tool's name) −
//! ln P(it begins "none"), each the probability summed over those of the alternatives that,
//! trimmed of spaces and backticks and lower-cased, begin a tool's name or "none". A margin
//! below the cut declines every tool: the turn is answered in text, as a call the guess
//! declines is. No answer, or no alternative read, keeps the call. No word of the question is
//! read.
//!
//! **The cut is per model class.** Its log-odds scale differs between models (docs/serve.md
//! gives the dev figures and the validation rows): there is no default, and without
//! `--choice-cut` the check is not asked.

use super::{Judgement, ToolSpec};

/// The ask that follows the question in the choice's request.
pub(crate) const ASK: &str = "\n\nWhich of the tools above would you call for this question? \
                              Reply with the tool's name only, or with none if no tool fits.";

/// How many of the first token's alternatives are asked for.
pub(crate) const TOP: u8 = 20;

/// The reading of an alternative that neither side has: e^-30 is no probability at all.
const FLOOR: f64 = -30.0;

/// ln P(a tool) − ln P(none) over the first token's `alternatives` (token, log-probability),
/// for the tools `names`; `None` when there are no alternatives to read.
pub(crate) fn margin(alternatives: &[(&str, f64)], names: &[&str]) -> Option<f64> {
    if alternatives.is_empty() {
        return None;
    }
    let names: Vec<String> = names.iter().map(|n| n.to_lowercase()).collect();
    let mass = |begins: &dyn Fn(&str) -> bool| {
        let p: f64 = alternatives
            .iter()
            .filter_map(|(token, logprob)| {
                let word = token.trim().trim_matches('`').to_lowercase();
                (!word.is_empty() && begins(&word)).then(|| logprob.exp())
            })
            .sum();
        if p > 0.0 { p.ln() } else { FLOOR }
    };
    let tool = mass(&|w| names.iter().any(|n| n.starts_with(w)));
    let none = mass(&|w| "none".starts_with(w));
    Some(tool - none)
}

/// The judgement of the declared `tools` by the choice's `margin` against `cut`: declined
/// below it; kept, unchecked, when nothing was read.
pub(crate) fn judgement(margin: Option<f64>, cut: f64, tools: &[&ToolSpec]) -> Judgement {
    let (declined, why) = match margin {
        Some(m) if m < cut => (
            true,
            format!(
                "asked which tool it would call, the model's odds of a tool over none were {m:.2}, below the cut {cut}"
            ),
        ),
        Some(m) => (
            false,
            format!(
                "asked which tool it would call, the model's odds of a tool over none were {m:.2}, at least the cut {cut}"
            ),
        ),
        None => (
            false,
            "the choice's request gave no odds to read: the call is kept unchecked".to_string(),
        ),
    };
    Judgement::choice(tools, declined, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_sums_each_sides_alternatives() {
        let names = ["get_weather", "Read_File"];
        // "get" and "read" begin a tool; "none" and "None" are none; "<" is neither.
        let alternatives = [
            ("get", -0.5),
            ("<", -2.0),
            ("none", -2.4),
            (" None", -3.2),
            ("`read", -3.9),
        ];
        let m = margin(&alternatives, &names).unwrap();
        let tool = ((-0.5f64).exp() + (-3.9f64).exp()).ln();
        let none = ((-2.4f64).exp() + (-3.2f64).exp()).ln();
        assert!((m - (tool - none)).abs() < 1e-9);
    }

    #[test]
    fn a_side_with_no_alternative_reads_as_the_floor() {
        assert_eq!(margin(&[("none", 0.0)], &["f"]), Some(FLOOR));
        assert_eq!(margin(&[("f", 0.0)], &["f"]), Some(-FLOOR));
        assert_eq!(margin(&[("  ", 0.0), ("<", -1.0)], &["f"]), Some(0.0));
        assert_eq!(margin(&[], &["f"]), None);
    }

    #[test]
    fn below_the_cut_declines_and_nothing_read_keeps() {
        let tool = ToolSpec::of_run("get_weather", "The weather.", &serde_json::json!({})).unwrap();
        let tools = [&tool];
        let judged = judgement(Some(0.4), 1.5, &tools);
        assert!(judged.declined);
        assert_eq!(judged.rule, "choice-odds");
        assert_eq!(judged.tools, ["get_weather"]);
        assert!(!judgement(Some(1.5), 1.5, &tools).declined);
        let kept = judgement(None, 1.5, &tools);
        assert!(!kept.declined && kept.why.contains("unchecked"));
    }
}
