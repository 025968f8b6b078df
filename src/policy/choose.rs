//! A call of the wrong tool among several, asked again for the tool the question's words name.
//!
//! Offered several tools of one family (`ecological_impact_analyze` beside
//! `wildlife_population_assess_growth`, `property_valuation_get` beside
//! `realestate_find_properties`), Qwen2.5-Coder-0.5B sometimes calls the neighbour of the tool
//! the question asks for. The question's own words tell them apart: of BFCL's 200 `multiple`
//! cases, the right tool shares strictly the most content words with the question (its name,
//! description, and its parameters' names and descriptions, as the guess's words are counted,
//! `words.rs`) in 189, ties for the most in 11, and is beaten by another tool in none
//! (docs/experiments.md, "Serve's 0.5B on multiple").
//!
//! So when a turn right after the question holds one call, under `auto` or `required`, and
//! another tool shares strictly more of the question's content words than the called one and
//! more than every other tool, the same prompt is asked once more with a grammar that allows
//! one call of that tool only (`answer.rs`): the model writes the arguments, the runtime chose
//! the tool. The same holds for a turn that answers in text under `auto` when the leading
//! tool's very name says a word of the question ("What is the capital of Brazil?" with
//! `country_info_capital` among the tools, answered "Brazil has no capital."); a lone tool,
//! BFCL's `irrelevance` kind, is never re-asked for. The re-asked call is read, bound and validated as any turn's, and judged next by
//! the grounding and the guess (`grounding.rs`, `guess.rs`) like the call it replaces; a re-ask
//! that fails or cannot be read leaves the first call as it was. Either way the re-ask is one
//! more upstream request of the answer, counted and its usage summed as any, and the turn it
//! wrote goes to the transcript, used or not (`answer.rs`). Without a grammar (an upstream
//! that takes none) nothing is re-asked: nothing would hold the model to the tool.

use std::collections::HashSet;

use super::Decision;
use super::words::{content_words, tool_words};
use super::{Choice, Entry, ToolSpec, View};

/// The tool a turn's call is re-asked for, and why (for the transcript).
pub(crate) struct Better<'a> {
    /// The tool the question's words name.
    pub tool: &'a ToolSpec,
    /// Why, in a sentence.
    pub why: String,
}

/// The tool `decision`'s one call should have called, when the question's words name another
/// clearly; `None` keeps the call.
pub(crate) fn better_tool<'a>(view: &View<'a>, decision: &Decision) -> Option<Better<'a>> {
    if !matches!(view.choice, Choice::Auto | Choice::Required) || view.tools.len() < 2 {
        return None;
    }
    let Some(Entry::Question(question)) = view.conversation.last() else {
        return None;
    };
    let asked = content_words(question);
    let score = |t: &ToolSpec| shared(&asked, t);
    let (top, tool) = leading(view, &asked)?;
    match decision {
        Decision::Calls(calls) => {
            let [(called, _)] = calls.as_slice() else {
                return None;
            };
            let called_score = score(view.tool(called)?);
            (top > called_score && tool.name != *called).then(|| Better {
                tool,
                why: format!(
                    "re-asked for {}: it shares {top} of the question's words, {called} {called_score}",
                    tool.name
                ),
            })
        }
        // The model's own answer, where a tool's very name says a word of the question and
        // that tool leads: asked for its call, which the grounding and the guess then judge
        // (a call they decline is answered again, as any).
        Decision::Answer { .. } => (view.choice == Choice::Auto
            && !asked.is_disjoint(&content_words(&tool.name)))
        .then(|| Better {
            tool,
            why: format!(
                "re-asked for {}: an answer, while its name says the question's words",
                tool.name
            ),
        }),
    }
}

/// The tool that shares the most of `asked` (the question's content words), with that count,
/// when it leads alone.
fn leading<'a>(view: &View<'a>, asked: &HashSet<String>) -> Option<(usize, &'a ToolSpec)> {
    let mut scores: Vec<(usize, &ToolSpec)> =
        view.tools.iter().map(|t| (shared(asked, t), t)).collect();
    scores.sort_by_key(|s| std::cmp::Reverse(s.0));
    match scores.as_slice() {
        [(top, tool), (next, _), ..] if top > next => Some((*top, *tool)),
        _ => None,
    }
}

/// Whether a text answer to `ask` would be asked again ([`better_tool`]); decided before the
/// turn, since it does not depend on the answer. Such an answer is held until its turn is read
/// instead of streaming as the upstream writes it (`live.rs`): it may not be the client's.
pub(crate) fn reasks_answers(view: &View<'_>) -> bool {
    let answer = Decision::Answer {
        text: String::new(),
        cut: false,
    };
    better_tool(view, &answer).is_some()
}

/// How many of the question's content words `tool`'s words hold.
fn shared(asked: &HashSet<String>, tool: &ToolSpec) -> usize {
    asked
        .intersection(&tool_words(&tool.name, &tool.description, &tool.parameters))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::{Ask, parse_json};
    use serde_json::{Map, Value, json};

    fn ask(question: &str, choice: Value, tools: &[(&str, &str)]) -> Ask {
        let tools: Vec<Value> = tools
            .iter()
            .map(|(name, description)| {
                json!({"type": "function", "function": {"name": name, "description": description,
                    "parameters": {"type": "object", "properties": {"species": {"type": "string"}}}}})
            })
            .collect();
        let body = json!({"messages": [{"role": "user", "content": question}],
            "tools": tools, "tool_choice": choice});
        Ask::read(&parse_json(body.to_string().as_bytes()).unwrap()).unwrap()
    }

    fn one_call(name: &str) -> Decision {
        Decision::Calls(vec![(name.to_string(), Map::new())])
    }

    /// BFCL multiple_7's two tools (descriptions cut to their first sentence).
    const DEER: &str = "How to assess the population growth in deer and their impact on woodland in Washington state over the past decade?";
    const DEER_TOOLS: &[(&str, &str)] = &[
        (
            "wildlife_population_assess_growth",
            "Assesses the population growth of a specific species in a specified location over a period.",
        ),
        (
            "ecological_impact_analyze",
            "Analyzes the impact of a species on a particular ecosystem.",
        ),
    ];

    #[test]
    fn a_call_of_the_tool_the_question_names_less_is_re_asked_for_the_other() {
        let a = ask(DEER, json!("auto"), DEER_TOOLS);
        let better = better_tool(&a.view(), &one_call("ecological_impact_analyze")).unwrap();
        assert_eq!(better.tool.name, "wildlife_population_assess_growth");
        assert!(
            better.why.contains("ecological_impact_analyze"),
            "{}",
            better.why
        );
        // The right tool is kept, and so is any call under `required` of the right one.
        assert!(better_tool(&a.view(), &one_call("wildlife_population_assess_growth")).is_none());
        let r = ask(DEER, json!("required"), DEER_TOOLS);
        assert!(better_tool(&r.view(), &one_call("ecological_impact_analyze")).is_some());
    }

    #[test]
    fn a_tie_at_the_top_or_a_named_choice_keeps_the_call() {
        // multiple_17: three currency tools share "conversion" and "rate" alike.
        let tools = [
            (
                "currency_conversion_convert",
                "Converts an amount at the latest rate.",
            ),
            (
                "currency_conversion_get_rate",
                "Get the conversion rate at a date.",
            ),
            (
                "currency_conversion_get_latest_rate",
                "Get the latest conversion rate.",
            ),
        ];
        let q = "Find the conversion rate from Euro to Dollar at January 1, 2022";
        let a = ask(q, json!("auto"), &tools);
        assert!(better_tool(&a.view(), &one_call("currency_conversion_convert")).is_none());
        let named = ask(
            DEER,
            json!({"type": "function", "function": {"name": "ecological_impact_analyze"}}),
            DEER_TOOLS,
        );
        assert!(better_tool(&named.view(), &one_call("ecological_impact_analyze")).is_none());
    }

    #[test]
    fn several_calls_an_answer_or_one_tool_are_left_alone() {
        let a = ask(DEER, json!("auto"), DEER_TOOLS);
        let two = Decision::Calls(vec![
            ("ecological_impact_analyze".into(), Map::new()),
            ("ecological_impact_analyze".into(), {
                let mut m = Map::new();
                m.insert("species".into(), json!("deer"));
                m
            }),
        ]);
        assert!(better_tool(&a.view(), &two).is_none());
        let lone = ask(DEER, json!("auto"), &DEER_TOOLS[1..]);
        assert!(better_tool(&lone.view(), &one_call("ecological_impact_analyze")).is_none());
    }

    #[test]
    fn an_answer_is_re_asked_only_for_a_leading_tool_its_name_said() {
        let answer = Decision::Answer {
            text: "Brazil has no capital.".into(),
            cut: false,
        };
        // BFCL multiple_2: "capital" is in one tool's name.
        let tools = [
            (
                "country_info_largest_city",
                "Fetch the largest city of a country.",
            ),
            (
                "country_info_capital",
                "Fetch the capital city of a country.",
            ),
            (
                "country_info_population",
                "Fetch the population of a country.",
            ),
        ];
        let a = ask("What is the capital of Brazil?", json!("auto"), &tools);
        let better = better_tool(&a.view(), &answer).unwrap();
        assert_eq!(better.tool.name, "country_info_capital");
        // A question no tool's name says, even when a description leads: the answer stands.
        let q = "Which city of Brazil is the largest?";
        assert!(better_tool(&(ask(q, json!("auto"), &tools[1..])).view(), &answer).is_none());
        assert!(
            better_tool(&(ask("Hello there", json!("auto"), &tools)).view(), &answer).is_none()
        );
    }
}
