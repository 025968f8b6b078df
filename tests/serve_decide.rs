//! The decision inside a `tagloop serve` turn, against a fake upstream that speaks the text
//! protocol: a call written again as the turn streams ends the turn there; distinct parallel
//! calls all come back; a call the conversation already made (its result is in the history the
//! client sent) is dropped, and a turn of nothing else is asked again for an answer; a refused
//! turn written again word for word, or the spent repair budget, ends in an answer-only turn
//! instead of a 502 under `auto`, never in an unvalidated call; a first call none of whose
//! required values the conversation gave is declined for an answer (`src/serve/decide.rs`).

mod common;

use std::time::Duration;

use common::fake_server::{FakeConfig, FakeServer, StopMode};
use common::serve::proxy;
use serde_json::{Value, json};
use tagloop::llm::GrammarMode;

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "weather", "description": "Weather of a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
            "required": ["city"]}}},
        {"type": "function", "function": {"name": "time", "description": "Local time of a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
            "required": ["city"]}}}
    ])
}

fn question(q: &str) -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": q}], "tools": tools()})
}

/// A conversation where `weather(city="Paris")` was called and its result came back.
fn after_weather() -> Value {
    json!({"model": "m", "tools": tools(), "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_a", "type": "function",
             "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "Sunny, 21 °C."}
    ]})
}

async fn post(base: &str, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}/chat/completions"))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn calls(v: &Value) -> Vec<(String, Value)> {
    v["choices"][0]["message"]["tool_calls"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    let args = c["function"]["arguments"].as_str().unwrap();
                    (
                        c["function"]["name"].as_str().unwrap().to_string(),
                        serde_json::from_str(args).unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The last message of an upstream chat request.
fn last_message(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Wait (a bounded while) until the fake saw `n` streams dropped by the client.
async fn aborted(fake: &FakeServer, n: usize) -> usize {
    for _ in 0..200 {
        if fake.aborted() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    fake.aborted()
}

/// A slow stream: the proxy has time to hang up before the fake has sent the turn.
fn slow(turn: String) -> FakeConfig {
    FakeConfig {
        chunk_delay: Duration::from_millis(3),
        token_chars: 4,
        ..FakeConfig::turns([turn])
    }
}

#[tokio::test]
async fn a_call_written_again_as_the_turn_streams_ends_the_turn() {
    // Qwen2.5-Coder-0.5B over BFCL wrote its one call eight times, until the token budget ran
    // out; the client got it once, after the whole budget's time.
    let call = "<action>weather(city=\"Paris\")</action>\n";
    let turn = format!("<thought>Paris.</thought>\n{}", call.repeat(8));
    let fake = FakeServer::start(slow(turn)).await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &question("Weather in Paris?")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        calls(&v),
        vec![("weather".into(), json!({"city": "Paris"}))]
    );
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(fake.request_count(), 1);
    assert_eq!(
        aborted(&fake, 1).await,
        1,
        "the stream should be dropped at the copy"
    );
}

#[tokio::test]
async fn distinct_parallel_calls_come_back_and_a_copy_after_them_ends_the_turn() {
    let turn = "<thought>Both.</thought>\n<action>weather(city=\"Paris\")</action>\n<action>time(city=\"Paris\")</action>\n<action>weather(city=\"Paris\")</action>\n".to_string()
        + &"<action>time(city=\"Oslo\")</action>\n".repeat(6);
    let fake = FakeServer::start(slow(turn)).await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &question("Weather and time in Paris?")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        calls(&v),
        vec![
            ("weather".into(), json!({"city": "Paris"})),
            ("time".into(), json!({"city": "Paris"}))
        ]
    );
    assert_eq!(aborted(&fake, 1).await, 1);
}

#[tokio::test]
async fn a_further_call_with_values_the_question_never_gave_ends_the_turn() {
    // Asked for one factorial, the 0.5B wrote the right call, then 4, 3, 2, 1, 0…: BFCL
    // counts the answer wrong (`wrong_count`). A question that wants several calls names their
    // values; a further call with one it never gave ends the turn before it.
    let turn = "<thought>Factorial.</thought>\n<action>math_factorial(number=5)</action>\n<action>math_factorial(number=4)</action>\n<action>math_factorial(number=3)</action>\n";
    let factorial = json!([{"type": "function", "function": {"name": "math_factorial",
        "parameters": {"type": "object", "properties": {"number": {"type": "integer"}},
          "required": ["number"]}}}]);
    let fake = FakeServer::start(FakeConfig::turns([
        turn.to_string(),
        turn.replace("number=4", "number=7")
            .replace("number=3", "number=7"),
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let mut body = question("Calculate the factorial of 5.");
    body["tools"] = factorial.clone();
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        calls(&v),
        vec![("math_factorial".into(), json!({"number": 5}))]
    );
    // Asked for two, both come back (and the copy of the second ends the turn).
    body["messages"][0]["content"] = json!("Factorials of 5 and 7?");
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        calls(&v),
        vec![
            ("math_factorial".into(), json!({"number": 5})),
            ("math_factorial".into(), json!({"number": 7}))
        ]
    );
}

#[tokio::test]
async fn without_parallel_calls_the_stop_still_ends_the_turn() {
    // `</action>` is a stop then; the watch for copies is not needed and nothing changes.
    let fake = FakeServer::start(FakeConfig {
        stop_mode: StopMode::Strip,
        ..FakeConfig::turns([
            "<action>weather(city=\"Paris\")</action>\n<action>time(city=\"Paris\")</action>",
        ])
    })
    .await;
    let base = proxy(&fake, |_| {}).await;
    let mut body = question("Weather in Paris?");
    body["parallel_tool_calls"] = json!(false);
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        calls(&v),
        vec![("weather".into(), json!({"city": "Paris"}))]
    );
}

#[tokio::test]
async fn a_call_already_answered_is_dropped_and_the_turn_asked_for_an_answer() {
    // The client's agent loop sent the result back; the 0.5B called the same tool again, three
    // identical turns in a row, until the client gave up.
    let fake = FakeServer::start(FakeConfig::turns([
        "<thought>I need the weather.</thought>\n<action>weather(city=\"Paris\")</action>",
        "<thought>I have it.</thought>\n<final_answer>Sunny, 21 °C.</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |c| c.grammar = GrammarMode::On).await;
    let (status, v) = post(&base, &after_weather()).await;
    assert_eq!(status, 200, "{v}");
    assert!(calls(&v).is_empty(), "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "Sunny, 21 °C.");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    assert!(
        last_message(&reqs[1].body).contains("You already called weather"),
        "{}",
        last_message(&reqs[1].body)
    );
    // The first turn could call; the second may only answer.
    let first = reqs[0].body["grammar"].as_str().unwrap();
    let second = reqs[1].body["grammar"].as_str().unwrap();
    assert!(first.contains("<action>"), "{first}");
    assert!(!second.contains("<action>"), "{second}");
}

#[tokio::test]
async fn a_new_call_beside_an_answered_one_is_kept_alone() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<action>weather(city=\"Paris\")</action>\n<action>time(city=\"Paris\")</action>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &after_weather()).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(calls(&v), vec![("time".into(), json!({"city": "Paris"}))]);
    assert_eq!(fake.request_count(), 1);
}

#[tokio::test]
async fn a_call_made_before_the_last_question_may_be_made_again() {
    // A later question may need the same call again: only calls since it count as answered.
    let mut body = after_weather();
    let messages = body["messages"].as_array_mut().unwrap();
    messages.push(json!({"role": "assistant", "content": "Sunny, 21 °C."}));
    messages.push(json!({"role": "user", "content": "And now?"}));
    let fake = FakeServer::start(FakeConfig::turns([
        "<action>weather(city=\"Paris\")</action>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        calls(&v),
        vec![("weather".into(), json!({"city": "Paris"}))]
    );
}

#[tokio::test]
async fn a_refused_turn_written_again_is_asked_for_an_answer_instead_of_a_502() {
    // At temperature 0 a repair can write the refused turn again word for word; a third try
    // would too. Under `auto` the next turn may only answer: the client gets a text answer,
    // never the call that did not validate.
    let bad = "<thought>Go.</thought>\n<action>weather(town=\"Paris\")</action>";
    let fake = FakeServer::start(FakeConfig::turns([
        bad,
        bad,
        "<final_answer>I could not look it up.</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &question("Weather in Paris?")).await;
    assert_eq!(status, 200, "{v}");
    assert!(calls(&v).is_empty(), "{v}");
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "I could not look it up."
    );
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 3);
    let told = last_message(&reqs[2].body);
    assert!(told.contains("unknown argument `town`"), "{told}");
    assert!(told.contains("give your final answer now"), "{told}");
}

#[tokio::test]
async fn under_required_a_turn_that_never_validates_is_still_a_502() {
    let fake = FakeServer::start(FakeConfig {
        default_reply: "<action>weather(town=\"Paris\")</action>".into(),
        ..FakeConfig::default()
    })
    .await;
    let base = proxy(&fake, |_| {}).await;
    let mut body = question("Weather in Paris?");
    body["tool_choice"] = json!("required");
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 502, "{v}");
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test]
async fn a_first_call_of_values_the_question_never_gave_is_declined_for_an_answer() {
    // BFCL irrelevance on Qwen2.5-Coder-0.5B: asked what no tool does, the model calls the
    // one tool there with values of its own. The call is declined; the same prompt is asked
    // again for an answer only, and the client gets the text.
    let fake = FakeServer::start(FakeConfig::turns([
        "<thought>I should solve it.</thought>\n<action>weather(city=\"Paris\")</action>",
        "<thought>No tool solves equations.</thought>\n<final_answer>x = 2</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |c| c.grammar = GrammarMode::On).await;
    let (status, v) = post(&base, &question("Solve 3x + 1 = 7.")).await;
    assert_eq!(status, 200, "{v}");
    assert!(calls(&v).is_empty(), "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "x = 2");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    // The same conversation, asked under the answer's grammar: the declined turn is not in it.
    assert_eq!(reqs[0].body["messages"], reqs[1].body["messages"]);
    let second = reqs[1].body["grammar"].as_str().unwrap();
    assert!(!second.contains("<action>"), "{second}");
}

#[tokio::test]
async fn a_call_with_one_value_the_question_gave_is_kept() {
    // "Boston, MA" for "Boston": a word of the value is enough; the first call is kept.
    let fake = FakeServer::start(FakeConfig::turns([
        "<action>weather(city=\"Boston, MA\")</action>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &question("Is it raining in boston?")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        calls(&v),
        vec![("weather".into(), json!({"city": "Boston, MA"}))]
    );
    assert_eq!(fake.request_count(), 1);
}

#[tokio::test]
async fn a_declined_call_written_again_without_a_grammar_is_corrected_not_a_502() {
    // Without a grammar the answer-only turn may call again: it is corrected, and the
    // client still gets the answer.
    let call = "<action>weather(city=\"Paris\")</action>";
    let fake = FakeServer::start(FakeConfig::turns([
        call,
        call,
        "<final_answer>I have no tool for that.</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &question("Tell me a joke.")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "I have no tool for that."
    );
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 3);
    let told = last_message(&reqs[2].body);
    assert!(told.contains("No tool may be called"), "{told}");
}

#[tokio::test]
async fn under_required_an_ungrounded_call_is_not_declined() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<action>weather(city=\"Paris\")</action>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let mut body = question("Tell me a joke.");
    body["tool_choice"] = json!("required");
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        calls(&v),
        vec![("weather".into(), json!({"city": "Paris"}))]
    );
}
