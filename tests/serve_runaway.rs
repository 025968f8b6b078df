//! A call whose last string argument never closes and runs into the protocol's own blocks
//! (`src/serve/runaway.rs`), against a fake upstream: the 0.5B Qwen on BFCL's `simple_python_9`
//! wrote `unit=")</thought> <final_answer>…` inside its call, was corrected twice at
//! temperature 0, and the client got a text answer after 56 s. The call is now read without
//! that argument when what is left validates, and corrected as before when it does not.

mod common;

use common::fake_server::{FakeConfig, FakeServer};
use common::serve::{post, proxy};
use serde_json::{Value, json};

fn area_tool(unit_required: bool) -> Value {
    let required = if unit_required {
        json!(["radius", "unit"])
    } else {
        json!(["radius"])
    };
    json!([{"type": "function", "function": {"name": "area_circle",
        "description": "The area of a circle.",
        "parameters": {"type": "object", "properties": {
            "radius": {"type": "number"}, "unit": {"type": "string"}},
          "required": required}}}])
}

/// The turn the 0.5B wrote, its string running on into the blocks after it.
fn runaway_turn() -> String {
    format!(
        "<thought>I call it.</thought>\n<action>area_circle(radius=5, unit=\"){}",
        "</thought> <final_answer>5 units has an area of 78.54 square units.</final_answer> <thought>Again."
            .repeat(3)
    )
}

fn question(unit_required: bool) -> Value {
    json!({"model": "m", "parallel_tool_calls": false,
        "messages": [{"role": "user", "content": "Area of a circle of radius 5?"}],
        "tools": area_tool(unit_required)})
}

#[tokio::test]
async fn an_optional_argument_that_ran_into_the_next_blocks_is_left_out_of_the_call() {
    let fake = FakeServer::start(FakeConfig::turns([runaway_turn()])).await;
    let base = proxy(&fake, |cfg| cfg.repairs = 0).await;
    let (status, v) = post(&base, &question(false)).await;
    assert_eq!(status, 200, "{v}");
    let call = &v["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "area_circle", "{v}");
    assert_eq!(call["arguments"], json!({"radius": 5}).to_string(), "{v}");
    assert_eq!(fake.requests().len(), 1, "no correction was asked");
}

#[tokio::test]
async fn a_required_one_is_corrected_as_before() {
    let fake = FakeServer::start(FakeConfig::turns([
        runaway_turn(),
        "<thought>I call it.</thought>\n<action>area_circle(radius=5, unit=\"cm\")</action>"
            .to_string(),
    ]))
    .await;
    let base = proxy(&fake, |cfg| cfg.repairs = 1).await;
    let (status, v) = post(&base, &question(true)).await;
    assert_eq!(status, 200, "{v}");
    let call = &v["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(
        call["arguments"],
        json!({"radius": 5, "unit": "cm"}).to_string(),
        "{v}"
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "the runaway call was corrected");
    let correction = requests[1].body.to_string();
    assert!(correction.contains("never closed"), "{correction}");
}
