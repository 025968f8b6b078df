//! The repair path of `tagloop serve` against a fake upstream: a turn cut inside its thought
//! (gemma and SmolLM2 over BFCL: `The answer is 10.000.000.000…` until the token budget ran
//! out) is closed where it was cut and continued to its decision, instead of being corrected
//! and asked again, which at temperature 0 wrote the same thought until the repair budget was
//! spent and the client got a 502 (issue 32). A call the continuation writes is validated as
//! any call. (The prompt opens the thought here: `--thought free` over completions.)

mod common;

use common::fake_server::{FakeConfig, FakeServer};
use common::serve::{ask, post, proxy};
use serde_json::json;
use tagloop::llm::{Api, GrammarMode};
use tagloop::serve::ThoughtMode;

/// The looping thought, far longer than the client's token budget.
fn endless_thought() -> String {
    format!("The answer is 10{}", ".000".repeat(100))
}

/// A thought cut by the client's 16-token budget, then a call, over completions with the prompt
/// opening the thought (`--thought free`): the call reaches the client; the fake's requests.
async fn cut_then_call(grammar: GrammarMode) -> FakeServer {
    let fake = FakeServer::start(FakeConfig::turns([
        endless_thought(),
        "<action>weather(city=\"Paris\")</action>".to_string(),
    ]))
    .await;
    let base = proxy(&fake, |cfg| {
        cfg.api = Api::Completions;
        cfg.grammar = grammar;
        cfg.thought = ThoughtMode::Free;
        cfg.repairs = 0;
    })
    .await;
    let (status, v) = post(&base, &ask(json!({"max_tokens": 16}))).await;
    assert_eq!(status, 200, "{v}");
    let call = &v["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "weather", "{v}");
    assert_eq!(call["arguments"], json!({"city": "Paris"}).to_string());
    fake
}

#[tokio::test]
async fn a_turn_cut_inside_its_thought_is_continued_to_its_call() {
    let fake = cut_then_call(GrammarMode::Off).await;
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    // The second request continues the first turn from its cut, the thought closed: no
    // correction between them.
    let first = requests[0].body["prompt"].as_str().unwrap();
    let second = requests[1].body["prompt"].as_str().unwrap();
    let cut = second
        .strip_prefix(first)
        .expect("the same prompt, continued");
    assert!(cut.starts_with("The answer is 10.000"), "{cut}");
    assert!(cut.ends_with("\n</thought>\n"), "{cut}");
    assert!(!cut.contains("<observation>"), "{cut}");
}

#[tokio::test]
async fn a_continued_turn_is_validated_and_corrected_like_any_other() {
    // The continuation calls a tool that does not exist: never sent to the client; it is
    // corrected as usual, and the answer the correction gets comes back.
    let fake = FakeServer::start(FakeConfig::turns([
        endless_thought(),
        "<action>nope(city=\"Paris\")</action>".to_string(),
        "<thought>Sunny.</thought><final_answer>It is sunny.</final_answer>".to_string(),
    ]))
    .await;
    let base = proxy(&fake, |cfg| {
        cfg.api = Api::Completions;
        cfg.thought = ThoughtMode::Free;
        cfg.repairs = 1;
    })
    .await;
    let (status, v) = post(&base, &ask(json!({"max_tokens": 16}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "It is sunny.", "{v}");
    assert!(v["choices"][0]["message"]["tool_calls"].is_null(), "{v}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    let prompt = |i: usize| requests[i].body["prompt"].as_str().unwrap().to_string();
    assert!(prompt(1).starts_with(&prompt(0)) && prompt(1).ends_with("\n</thought>\n"));
    // The correction follows the whole continued turn.
    let after = prompt(2);
    let rest = after
        .strip_prefix(&prompt(0))
        .expect("the same conversation");
    let call = rest.find("<action>nope(").expect("the continued turn");
    assert!(rest[..call].contains("</thought>"), "{rest}");
    assert!(rest[call..].contains("<observation>"), "{rest}");
}

#[tokio::test]
async fn under_a_grammar_the_continuation_writes_its_decision_not_another_thought() {
    // The continuation's grammar begins at the decision: gemma, asked again under the first
    // grammar, wrote the thought over and over.
    let fake = cut_then_call(GrammarMode::On).await;
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let grammar = |i: usize| {
        requests[i].body["grammar"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert!(grammar(0).contains("thought-word"), "{}", grammar(0));
    let second = grammar(1);
    assert!(!second.contains("thought"), "{second}");
    assert!(second.contains("<action>"), "{second}");
}
