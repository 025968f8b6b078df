//! Optional arguments nobody asked for, left out of a kept call (the `unsaid-optional` policy).
//!
//! A small model filling a call fills every parameter it sees. Asked for "the area of a
//! triangle with base 10 and height 5", Qwen2.5-Coder-0.5B writes `unit="cm"` beside the two
//! numbers; asked for a city's weather it adds `days=7`. The user said neither. A real API
//! acts on the invented value, and BFCL counts the call wrong wherever the value is not one it
//! accepts. The tool's own default is the better guess: it is what the tool's author chose for a
//! caller who says nothing.
//!
//! So, once a turn's calls are kept, every call loses the **optional** arguments (not in the
//! schema's `required`) whose value the conversation never gave, judged as the grounding rule
//! judges a value (`mentions.rs`: the instructions, the user's messages and the tools'
//! results, allowing for case, a word of a longer value and a number written differently).
//! Left alone: booleans and nulls (nothing to find in the words), values of a property whose
//! schema lists its choices (`enum`, `const`: the tool gave those), and required arguments (the
//! call cannot go without them; the grounding rule judges those). A call whose arguments no
//! longer validate without the value keeps it.
//!
//! The transcript's `decisions` records each left-out argument (rule `unsaid-optional`).

use serde_json::{Map, Value};

use super::Decision;
use super::Judgement;
use super::View;
use super::grounding::listed;
use super::mentions::judgeable;

/// Leaves out of `decision`'s calls the optional arguments whose values `ask`'s conversation
/// never gave; the judgement of each call that lost one.
pub(crate) fn leave_out(view: &View<'_>, decision: &mut Decision) -> Vec<Judgement> {
    let Decision::Calls(calls) = decision else {
        return Vec::new();
    };
    let mut judged = Vec::new();
    for (name, args) in calls.iter_mut() {
        if let Some((kept, unsaid)) = without_unsaid(view, name, args) {
            *args = kept;
            judged.push(Judgement::left_out(name, &unsaid));
        }
    }
    judged
}

/// A call of `name` with `args` as this policy sends it: the arguments kept and the ones left
/// out, or None when it leaves nothing out (an unknown tool, nothing unsaid, or arguments that
/// would no longer validate without the values). `answered-call` compares calls in this form,
/// since the client ran the call as it was sent.
pub(crate) fn without_unsaid(
    view: &View<'_>,
    name: &str,
    args: &Map<String, Value>,
) -> Option<(Map<String, Value>, Vec<String>)> {
    let tool = view.tool(name)?;
    let said = view.mentions();
    let unsaid: Vec<String> = args
        .iter()
        .filter(|(arg, value)| {
            optional_free(&tool.parameters, arg) && judgeable(value) && !said.mentions(value)
        })
        .map(|(arg, _)| arg.clone())
        .collect();
    if unsaid.is_empty() {
        return None;
    }
    let kept: Map<String, Value> = args
        .iter()
        .filter(|(arg, _)| !unsaid.contains(arg))
        .map(|(a, v)| (a.clone(), v.clone()))
        .collect();
    if !tool.validator.is_valid(&Value::Object(kept.clone())) {
        return None;
    }
    Some((kept, unsaid))
}

/// Whether `arg` is an optional parameter of the schema `parameters` whose values are free
/// (no `enum` or `const` lists them).
fn optional_free(parameters: &Value, arg: &str) -> bool {
    let required = parameters["required"]
        .as_array()
        .is_some_and(|r| r.iter().any(|n| n.as_str() == Some(arg)));
    !required && !listed(&parameters["properties"][arg])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::{Ask, parse_json};
    use serde_json::json;

    fn ask_with(question: &str, tool: Value) -> Ask {
        let body = json!({"messages": [{"role": "user", "content": question}], "tools": [tool]});
        Ask::read(&parse_json(body.to_string().as_bytes()).unwrap()).unwrap()
    }

    fn calls(decision: &Decision) -> &[(String, Map<String, Value>)] {
        match decision {
            Decision::Calls(c) => c,
            Decision::Answer { .. } => &[],
        }
    }

    fn area_tool() -> Value {
        json!({
            "type": "function",
            "function": {
                "name": "triangle_area",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "base": {"type": "number"},
                        "height": {"type": "number"},
                        "unit": {"type": "string"},
                        "precise": {"type": "boolean"},
                        "shape": {"type": "string", "enum": ["right", "any"]}
                    },
                    "required": ["base", "height"]
                }
            }
        })
    }

    fn one_call(args: Value) -> Decision {
        let Value::Object(args) = args else {
            unreachable!("the tests pass objects")
        };
        Decision::Calls(vec![("triangle_area".into(), args)])
    }

    #[test]
    fn an_optional_value_nobody_gave_is_left_out() {
        let ask = ask_with(
            "Find the area of a triangle with base 10 and height 5.",
            area_tool(),
        );
        let mut decision = one_call(json!({"base": 10, "height": 5, "unit": "cm"}));
        let judged = leave_out(&ask.view(), &mut decision);
        assert_eq!(
            calls(&decision)[0].1,
            json!({"base": 10, "height": 5})
                .as_object()
                .cloned()
                .unwrap_or_default()
        );
        assert_eq!(judged.len(), 1);
        assert_eq!(judged[0].rule, "unsaid-optional");
        assert!(judged[0].why.contains("unit"), "{}", judged[0].why);
    }

    #[test]
    fn an_optional_value_the_user_gave_stays() {
        let ask = ask_with(
            "The area of a triangle, base 10 and height 5, in square meters please.",
            area_tool(),
        );
        let mut decision = one_call(json!({"base": 10, "height": 5, "unit": "meters"}));
        assert!(leave_out(&ask.view(), &mut decision).is_empty());
        assert_eq!(calls(&decision)[0].1["unit"], "meters");
    }

    #[test]
    fn required_booleans_and_listed_choices_are_not_judged() {
        let ask = ask_with(
            "Find the area of a triangle with base 10 and height 5.",
            area_tool(),
        );
        // A required value nobody gave stays (the grounding rule's), as do a boolean and a
        // value the schema's enum lists.
        let mut decision =
            one_call(json!({"base": 12, "height": 5, "precise": true, "shape": "right"}));
        assert!(leave_out(&ask.view(), &mut decision).is_empty());
        assert_eq!(calls(&decision)[0].1.len(), 4);
    }

    #[test]
    fn an_answer_is_left_as_it_is() {
        let ask = ask_with("Hello", area_tool());
        let mut decision = Decision::Answer {
            text: "Hi".into(),
            cut: false,
        };
        assert!(leave_out(&ask.view(), &mut decision).is_empty());
    }
}
