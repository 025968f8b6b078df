//! A call that counts on inside a list argument (`src/policy/grounded.rs` `may_cut_counting`),
//! against a fake upstream under a grammar: the 0.5B Qwen, asked to count the primes between 50
//! and 150, wrote `count_items(collection=["50", "51", "52", …` until the token budget, twice
//! (226 s on BFCL's `parallel_multiple_6`). Serve's constrained turn now cuts a line that runs on
//! without a word, as a run's does, unless the client's messages hold such a line themselves: a
//! call may rightly copy a hundred numbers from the question.

mod common;

use common::fake_server::{FakeConfig, FakeServer};
use common::serve::{post, proxy};
use serde_json::{Value, json};
use tagloop::llm::GrammarMode;

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "count_items",
        "description": "Count the items of a collection.",
        "parameters": {"type": "object", "properties": {
            "collection": {"type": "array", "items": {"type": "string"}}},
          "required": ["collection"]}}}])
}

/// `count_items` over the numbers `from..=to`, each quoted.
fn counting_call(from: u32, to: u32) -> String {
    let items: Vec<String> = (from..=to).map(|n| format!("\"{n}\"")).collect();
    format!(
        "<thought>I count them.</thought>\n<action>count_items(collection=[{}])</action>",
        items.join(", ")
    )
}

fn question(q: &str) -> Value {
    json!({"model": "m", "parallel_tool_calls": false, "tool_choice": "required",
        "messages": [{"role": "user", "content": q}], "tools": tools()})
}

#[tokio::test]
async fn a_count_the_question_never_gave_is_cut_and_corrected() {
    let fake = FakeServer::start(FakeConfig::turns([
        counting_call(50, 150),
        counting_call(50, 52),
    ]))
    .await;
    let base = proxy(&fake, |c| {
        c.grammar = GrammarMode::On;
        c.repairs = 1;
    })
    .await;
    let (status, v) = post(
        &base,
        &question("How many primes are there between 50 and 150?"),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "the counting turn was cut and corrected");
    let kept = requests[1].body["messages"].to_string();
    assert!(kept.contains("\\\"50\\\", \\\"51\\\""), "{kept}");
    assert!(!kept.contains("\\\"150\\\""), "cut before the end: {kept}");
    let args = &v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"];
    assert_eq!(
        args,
        &json!({"collection": ["50", "51", "52"]}).to_string(),
        "{v}"
    );
}

#[tokio::test]
async fn a_list_the_question_gives_is_copied_whole() {
    let list = (50..=150)
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let fake = FakeServer::start(FakeConfig::turns([counting_call(50, 150)])).await;
    let base = proxy(&fake, |c| {
        c.grammar = GrammarMode::On;
        c.repairs = 0;
    })
    .await;
    let (status, v) = post(&base, &question(&format!("Count these: [{list}]"))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(fake.requests().len(), 1);
    let args = &v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"];
    let collection: Value = serde_json::from_str(args.as_str().unwrap()).unwrap();
    assert_eq!(collection["collection"].as_array().map(Vec::len), Some(101));
}

#[tokio::test]
async fn a_list_a_tool_result_gives_one_item_to_a_line_is_copied_whole() {
    // Pretty-printed JSON: no line of it is long, but the run is the client's all the same.
    let lines = (50..=150)
        .map(|n| format!("  \"{n}\""))
        .collect::<Vec<_>>()
        .join(",\n");
    let fake = FakeServer::start(FakeConfig::turns([counting_call(50, 150)])).await;
    let base = proxy(&fake, |c| {
        c.grammar = GrammarMode::On;
        c.repairs = 0;
    })
    .await;
    let body = json!({"model": "m", "parallel_tool_calls": false, "tool_choice": "required",
    "tools": tools(), "messages": [
        {"role": "user", "content": "Count the numbers the other count gave."},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "count_items", "arguments": "{\"collection\": [\"x\"]}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": format!("[\n{lines}\n]")}
    ]});
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(fake.requests().len(), 1);
    let args = &v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"];
    let collection: Value = serde_json::from_str(args.as_str().unwrap()).unwrap();
    assert_eq!(collection["collection"].as_array().map(Vec::len), Some(101));
}
