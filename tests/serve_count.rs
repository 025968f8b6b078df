//! As many calls as the question asks, against a fake upstream that speaks the text protocol:
//! under `parallel_tool_calls` a further call in a turn right after the question must bring
//! something the calls before it did not (the same tool: a new value; another tool: a word of
//! its name the question says and the earlier tools' names do not), or the turn ends before it
//! (`src/serve/further.rs`). Wanted parallel calls all come back; once results are back, a new
//! call is not held to the question. The answer's `usage` counts a turn whose stream serve cut.

mod common;

use common::fake_server::{FakeConfig, FakeServer};
use common::serve::{post, proxy};
use serde_json::{Value, json};

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "triangle_area_heron",
          "parameters": {"type": "object", "properties": {
            "side1": {"type": "number"}, "side2": {"type": "number"}, "side3": {"type": "number"}},
            "required": ["side1", "side2", "side3"]}}},
        {"type": "function", "function": {"name": "triangle_area_base_height",
          "parameters": {"type": "object", "properties": {
            "base": {"type": "number"}, "height": {"type": "number"}},
            "required": ["base", "height"]}}},
        {"type": "function", "function": {"name": "circle_area",
          "parameters": {"type": "object", "properties": {"radius": {"type": "number"}},
            "required": ["radius"]}}}
    ])
}

fn question(q: &str) -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": q}], "tools": tools(),
           "tool_choice": "required"})
}

fn names(v: &Value) -> Vec<(String, Value)> {
    v["choices"][0]["message"]["tool_calls"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    let args = c["function"]["arguments"].as_str().unwrap_or("{}");
                    (
                        c["function"]["name"].as_str().unwrap_or("").to_string(),
                        serde_json::from_str(args).unwrap_or(Value::Null),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

const HERON: &str = "<action>triangle_area_heron(side1=3, side2=4, side3=5)</action>\n";

#[tokio::test]
async fn another_tool_fed_the_first_calls_values_ends_the_turn() {
    // The 0.5B on BFCL multiple_1: the right call, then the other triangle tool with the same
    // numbers, four times; BFCL wanted one call.
    let turn = format!(
        "<thought>Area.</thought>\n{HERON}{}",
        "<action>triangle_area_base_height(base=3, height=4)</action>\n<action>triangle_area_base_height(base=4, height=5)</action>\n"
    );
    let fake = FakeServer::start(FakeConfig::turns([turn])).await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(
        &base,
        &question("The area of a triangle whose sides are 3, 4 and 5?"),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        names(&v),
        vec![(
            "triangle_area_heron".into(),
            json!({"side1": 3, "side2": 4, "side3": 5})
        )]
    );
}

#[tokio::test]
async fn the_same_tool_with_nothing_new_ends_the_turn() {
    // The sides in another order: the same triangle.
    let turn = format!(
        "{HERON}<action>triangle_area_heron(side1=5, side2=4, side3=3)</action>\n{}",
        "<action>circle_area(radius=3)</action>\n"
    );
    let fake = FakeServer::start(FakeConfig::turns([turn])).await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &question("Triangle of sides 3, 4 and 5: its area?")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(names(&v).len(), 1, "{v}");
}

#[tokio::test]
async fn calls_the_question_asks_for_all_come_back() {
    // Two triangles, and a circle the question names: three calls.
    let turn = format!(
        "{HERON}{}",
        "<action>triangle_area_heron(side1=6, side2=8, side3=10)</action>\n<action>circle_area(radius=2)</action>\n"
    );
    let fake = FakeServer::start(FakeConfig::turns([turn])).await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(
        &base,
        &question(
            "Areas of the triangles with sides 3, 4, 5 and 6, 8, 10; also the area of a circle of radius 2.",
        ),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let called: Vec<String> = names(&v).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        called,
        ["triangle_area_heron", "triangle_area_heron", "circle_area"]
    );
}

#[tokio::test]
async fn once_results_are_back_a_new_tool_is_not_held_to_the_question() {
    let turn = "<action>circle_area(radius=3)</action>\n<action>triangle_area_base_height(base=3, height=4)</action>\n";
    let fake = FakeServer::start(FakeConfig::turns([turn])).await;
    let base = proxy(&fake, |_| {}).await;
    let body = json!({"model": "m", "tools": tools(), "tool_choice": "required", "messages": [
        {"role": "user", "content": "The area of a triangle whose sides are 3, 4 and 5?"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "triangle_area_heron",
             "arguments": "{\"side1\": 3, \"side2\": 4, \"side3\": 5}"}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "6"}
    ]});
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(names(&v).len(), 2, "{v}");
}

#[tokio::test]
async fn usage_counts_the_prompt_of_a_turn_serve_cut() {
    // The stream is dropped at the copy, before the upstream's closing usage: the client's
    // `usage` said `prompt_tokens: 0`. The server's tokenizer counts it instead.
    let fake = FakeServer::start(FakeConfig {
        props: true,
        tokenizer: true,
        ..FakeConfig::turns([HERON.repeat(6)])
    })
    .await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &question("Triangle of sides 3, 4, 5?")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(names(&v).len(), 1, "{v}");
    let sent = fake.requests();
    assert_eq!(sent.len(), 1);
    let prompt = FakeServer::prompt_tokens(&sent[0].body);
    assert!(prompt > 0);
    assert_eq!(v["usage"]["prompt_tokens"], prompt, "{v}");
    assert!(v["usage"]["completion_tokens"].as_u64() > Some(0), "{v}");
}
