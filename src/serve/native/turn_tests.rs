use serde_json::json;

use super::*;
use crate::policy::Decision;

fn ask(extra: Value) -> Ask {
    let mut body = json!({
        "model": "m",
        "messages": [{"role": "user", "content": "Weather in Paris and Rome?"}],
        "tools": [{"type": "function", "function": {"name": "weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]}}}],
    });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    Ask::read(&body).unwrap()
}

fn read_turn(text: &str, ask: &Ask) -> Result<Read, Refusal> {
    let role = conversation::role(ask).unwrap();
    read_native(
        text,
        &Finish::End,
        ask,
        &role,
        false,
        crate::policy::Policies::all(),
    )
}

#[test]
fn call_blocks_are_calls() {
    let ask = ask(json!({}));
    let text = "<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";
    let read = read_turn(text, &ask).unwrap();
    let Decision::Calls(calls) = read.decision else {
        panic!("{read:?}")
    };
    let cities: Vec<&Value> = calls.iter().map(|(_, a)| &a["city"]).collect();
    assert_eq!(cities, [&json!("Paris"), &json!("Rome")]);
}

#[test]
fn a_repeated_block_is_one_call_and_without_parallel_only_the_first_counts() {
    let block = "<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n";
    let twice = format!("{block}{block}");
    let read = read_turn(&twice, &ask(json!({}))).unwrap();
    assert!(
        matches!(read.decision, Decision::Calls(ref c) if c.len() == 1),
        "{read:?}"
    );
    let other = format!(
        "{block}<tool_call>\n{{\"name\": \"weather\", \"arguments\": {{\"city\": \"Rome\"}}}}\n</tool_call>"
    );
    let read = read_turn(&other, &ask(json!({"parallel_tool_calls": false}))).unwrap();
    assert!(
        matches!(read.decision, Decision::Calls(ref c) if c.len() == 1),
        "{read:?}"
    );
}

#[test]
fn a_fence_that_calls_an_undeclared_function_is_refused_not_passed_as_text() {
    for text in [
        "Like this:\n```json\n{\"name\": \"other\", \"arguments\": {}}\n```",
        "{\"name\": \"other\", \"arguments\": {\"x\": 1}}",
    ] {
        let refusal = read_turn(text, &ask(json!({}))).unwrap_err();
        assert!(refusal.message.contains("`other`"), "{}", refusal.message);
        // Under `auto` the next turn answers in text.
        assert!(refusal.answer_next);
        assert_eq!(refusal.kept, text);
    }
    // JSON that is no call is text.
    let text = "Here:\n```json\n{\"city\": \"Paris\"}\n```";
    let read = read_turn(text, &ask(json!({}))).unwrap();
    assert!(matches!(read.decision, Decision::Answer { .. }), "{read:?}");
}

#[test]
fn text_is_the_answer() {
    let read = read_turn("I cannot tell the weather of Atlantis.", &ask(json!({}))).unwrap();
    assert_eq!(
        read.decision,
        Decision::Answer {
            text: "I cannot tell the weather of Atlantis.".into(),
            cut: false
        }
    );
}

#[test]
fn a_call_written_as_fenced_or_bare_json_is_a_call() {
    for text in [
        "```json\n{\n  \"name\": \"weather\",\n  \"arguments\": {\"city\": \"Paris\"}\n}\n```",
        "{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}",
        "Use the weather tool.\n\n```python\nweather('Paris')\n```\nHere's the JSON object for the function call:\n\n```json\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}\n```",
    ] {
        let read = read_turn(text, &ask(json!({}))).unwrap();
        assert!(
            matches!(read.decision, Decision::Calls(ref c) if c[0].1["city"] == "Paris"),
            "{text}: {read:?}"
        );
    }
}

#[test]
fn text_where_a_call_is_required_is_refused_as_written() {
    let text = "It is sunny.";
    let refusal = read_turn(text, &ask(json!({"tool_choice": "required"}))).unwrap_err();
    assert!(refusal.message.contains("must call"), "{}", refusal.message);
    assert_eq!(refusal.kept, text);
}

#[test]
fn a_call_against_the_schema_is_refused() {
    let text =
        "<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"town\": \"Paris\"}}\n</tool_call>";
    let refusal = read_turn(text, &ask(json!({}))).unwrap_err();
    assert!(refusal.message.contains("city"), "{}", refusal.message);
}

#[test]
fn the_conversation_becomes_the_templates_messages() {
    let body = json!({"model": "m", "tools": [{"type": "function", "function": {"name": "weather"}}],
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "Sunny."}]});
    let m = messages(&Ask::read(&body).unwrap(), &Markers::of("", "", ""));
    assert_eq!(m.len(), 4);
    assert_eq!(m[0]["role"], "system");
    assert_eq!(
        m[2]["tool_calls"][0]["function"]["arguments"]["city"],
        "Paris"
    );
    assert_eq!(
        m[3],
        json!({"role": "tool", "name": "weather", "content": "Sunny."})
    );
}

#[test]
fn the_grammar_follows_tool_choice() {
    let auto = grammar(&ask(json!({})), false).unwrap();
    assert!(
        auto.gbnf.starts_with("root ::= calls | answer"),
        "{}",
        auto.gbnf
    );
    let required = grammar(&ask(json!({"tool_choice": "required"})), false).unwrap();
    assert!(
        required.gbnf.starts_with("root ::= calls\n"),
        "{}",
        required.gbnf
    );
    let answer = grammar(&ask(json!({})), true).unwrap();
    assert!(
        answer.gbnf.starts_with("root ::= answer\n"),
        "{}",
        answer.gbnf
    );
    // A turn that may call or answer is constrained from `<tool_call>` on; the others whole.
    let lazy = auto.lazy.as_ref().unwrap();
    assert_eq!(lazy.triggers, ["<tool_call>"]);
    assert!(lazy.gbnf.starts_with("root ::= calls\n"), "{}", lazy.gbnf);
    assert!(required.lazy.is_none() && answer.lazy.is_none());
}
