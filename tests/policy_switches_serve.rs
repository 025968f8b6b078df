//! Every serve-side policy of `src/policy.rs` switches: one test per policy sends the same
//! request through `tagloop serve`'s router, in front of a fake upstream replaying the same
//! turns, with every policy on and with that one off, and shows what the rule did and that
//! without it the client gets something else. (The rules' own tests: `serve_decide.rs`,
//! `serve_guess.rs`, `serve_choose.rs`, `serve_thought.rs`, `serve/unsaid.rs`'s unit tests.)

mod common;

use common::fake_server::{FakeConfig, FakeGuess, FakeServer};
use common::serve::{ask, post, proxy};
use serde_json::{Value, json};
use tagloop::llm::GrammarMode;
use tagloop::policy::{Policies, Policy};

/// The calls of an answer: name and arguments.
fn calls(v: &Value) -> Vec<(String, Value)> {
    let calls = v["choices"][0]["message"]["tool_calls"].as_array();
    calls
        .into_iter()
        .flatten()
        .map(|c| {
            let args = c["function"]["arguments"].as_str().unwrap_or("null");
            let name = c["function"]["name"].as_str().unwrap_or_default();
            (
                name.to_owned(),
                serde_json::from_str(args).unwrap_or(Value::Null),
            )
        })
        .collect()
}

/// What the client gets for `body`, the fake replying `fake`, with every policy on and then
/// with all but `policy` (a grammar sent when `grammar`); each with the upstream's requests
/// and guesses. The first must be a 200.
async fn both(
    policy: Policy,
    fake: impl Fn() -> FakeConfig,
    grammar: bool,
    body: &Value,
) -> [(Value, FakeServer); 2] {
    let mut out = Vec::new();
    for policies in [Policies::all(), Policies::all().without(policy)] {
        let server = FakeServer::start(fake()).await;
        let base = proxy(&server, |c| {
            c.policies = policies;
            if grammar {
                c.grammar = GrammarMode::On;
            }
        })
        .await;
        let (status, v) = post(&base, body).await;
        assert_eq!(status, 200, "{policy}: {v}");
        out.push((v, server));
    }
    let [on, off]: [(Value, FakeServer); 2] = out.try_into().ok().expect("two runs");
    [on, off]
}

fn question(q: &str, tools: Value) -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": q}], "tools": tools})
}

fn function(name: &str, properties: Value, required: Value) -> Value {
    json!({"type": "function", "function": {"name": name, "description": "",
        "parameters": {"type": "object", "properties": properties, "required": required}}})
}

#[tokio::test]
async fn grounding() {
    // A first call none of whose values the question gave.
    let fake = || {
        FakeConfig::turns([
            "<thought>I solve it.</thought>\n<action>weather(city=\"Paris\")</action>",
            "<thought>No tool solves it.</thought>\n<final_answer>x = 2</final_answer>",
        ])
    };
    let body = ask(json!({"messages": [{"role": "user", "content": "Solve 3x + 1 = 7."}]}));
    let [(on, _), (off, _)] = both(Policy::Grounding, fake, true, &body).await;
    assert!(calls(&on).is_empty(), "{on}");
    assert_eq!(on["choices"][0]["message"]["content"], "x = 2");
    assert_eq!(calls(&off), [("weather".into(), json!({"city": "Paris"}))]);
}

#[tokio::test]
async fn guess() {
    // A grounded call of a tool that is not about the model's own guessed function.
    let bmi = json!([function(
        "determine_body_mass_index",
        json!({"weight": {"type": "number"}, "height": {"type": "number"}}),
        json!(["weight", "height"])
    )]);
    let fake = || FakeConfig {
        guess: FakeGuess {
            reply: Some("triangle_area".into()),
            ..FakeGuess::default()
        },
        ..FakeConfig::turns([
            "<thought>I use the tool.</thought>\n<action>determine_body_mass_index(weight=10, height=5)</action>",
            "<thought>No tool does areas.</thought>\n<final_answer>25 square meters.</final_answer>",
        ])
    };
    let q = "Calculate the area of a triangle given the base is 10 meters and height is 5 meters.";
    let [(on, on_fake), (off, off_fake)] = both(Policy::Guess, fake, true, &question(q, bmi)).await;
    assert!(calls(&on).is_empty(), "{on}");
    assert_eq!(on_fake.guesses().len(), 1);
    assert_eq!(calls(&off)[0].0, "determine_body_mass_index", "{off}");
    assert!(off_fake.guesses().is_empty(), "nothing is guessed");
}

#[tokio::test]
async fn unsaid_optional() {
    // A kept call that fills an optional parameter the question never mentioned.
    let area = json!([function(
        "triangle_area",
        json!({"base": {"type": "number"}, "height": {"type": "number"}, "unit": {"type": "string"}}),
        json!(["base", "height"])
    )]);
    let fake = || FakeConfig {
        guess: FakeGuess {
            reply: Some("triangle_area".into()),
            ..FakeGuess::default()
        },
        ..FakeConfig::turns([
            "<thought>I use the tool.</thought>\n<action>triangle_area(base=10, height=5, unit=\"cm\")</action>",
        ])
    };
    let q = "Calculate the area of a triangle given the base is 10 and height is 5.";
    let body = question(q, area);
    let [(on, _), (off, _)] = both(Policy::UnsaidOptional, fake, true, &body).await;
    assert_eq!(
        calls(&on),
        [("triangle_area".into(), json!({"base": 10, "height": 5}))],
        "{on}"
    );
    assert_eq!(calls(&off)[0].1["unit"], "cm", "{off}");
}

#[tokio::test]
async fn answered_call() {
    // The model calls again what the conversation already holds the result of.
    let weather = json!([function(
        "weather",
        json!({"city": {"type": "string"}}),
        json!(["city"])
    )]);
    let body = json!({"model": "m", "tools": weather, "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Sunny, 21 C."}]});
    let fake = || {
        FakeConfig::turns([
            "<thought>Again.</thought>\n<action>weather(city=\"Paris\")</action>",
            "<thought>I have it.</thought>\n<final_answer>Sunny, 21 C.</final_answer>",
        ])
    };
    let [(on, on_fake), (off, off_fake)] = both(Policy::AnsweredCall, fake, false, &body).await;
    assert!(calls(&on).is_empty(), "{on}");
    assert_eq!(on["choices"][0]["message"]["content"], "Sunny, 21 C.");
    assert_eq!(on_fake.request_count(), 2, "the answer was asked for");
    assert_eq!(calls(&off), [("weather".into(), json!({"city": "Paris"}))]);
    assert_eq!(off_fake.request_count(), 1);
}

#[tokio::test]
async fn further() {
    // Asked for one factorial, the turn goes on to others nobody asked for.
    let turn = "<thought>Factorial.</thought>\n<action>math_factorial(number=5)</action>\n<action>math_factorial(number=4)</action>\n<action>math_factorial(number=3)</action>\n";
    let factorial = json!([function(
        "math_factorial",
        json!({"number": {"type": "integer"}}),
        json!(["number"])
    )]);
    let body = question("Calculate the factorial of 5.", factorial);
    let fake = || FakeConfig::turns([turn]);
    let [(on, _), (off, _)] = both(Policy::Further, fake, false, &body).await;
    let numbers = |v: &Value| -> Vec<Value> {
        calls(v)
            .into_iter()
            .map(|(_, a)| a["number"].clone())
            .collect()
    };
    assert_eq!(numbers(&on), [json!(5)]);
    assert_eq!(numbers(&off), [json!(5), json!(4), json!(3)]);
}

#[tokio::test]
async fn choose() {
    // BFCL multiple_7: the model calls the tool the question names less.
    let tools = json!([
        function(
            "wildlife_population_assess_growth",
            json!({"species": {"type": "string"}, "location": {"type": "string"}, "duration": {"type": "integer"}}),
            json!(["species", "location", "duration"])
        ),
        function(
            "ecological_impact_analyze",
            json!({"species": {"type": "string"}, "ecosystem": {"type": "string"}, "location": {"type": "string"}, "timeframe": {"type": "integer"}}),
            json!(["species", "ecosystem", "location"])
        ),
    ]);
    let q = "How to assess the population growth in deer and their impact on woodland in Washington state over the past decade?";
    let fake = || {
        FakeConfig::turns([
            "<thought>I analyze.</thought>\n<action>ecological_impact_analyze(species=\"deer\", ecosystem=\"woodland\", location=\"Washington\", timeframe=10)</action>",
            "<thought>I assess.</thought>\n<action>wildlife_population_assess_growth(species=\"deer\", location=\"Washington state\", duration=10)</action>",
        ])
    };
    let [(on, on_fake), (off, off_fake)] =
        both(Policy::Choose, fake, true, &question(q, tools)).await;
    assert_eq!(calls(&on)[0].0, "wildlife_population_assess_growth", "{on}");
    assert_eq!(on_fake.requests().len(), 2);
    assert_eq!(calls(&off)[0].0, "ecological_impact_analyze", "{off}");
    assert_eq!(off_fake.requests().len(), 1);
}

#[tokio::test]
async fn no_thought() {
    let fake = || FakeConfig::turns(["<action>weather(city=\"Paris\")</action>"]);
    let [(on, on_fake), (off, off_fake)] =
        both(Policy::NoThought, fake, true, &ask(json!({}))).await;
    let grammar = |f: &FakeServer| {
        f.requests()[0].body["grammar"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        !grammar(&on_fake).contains("<thought>"),
        "{}",
        grammar(&on_fake)
    );
    assert!(
        grammar(&off_fake).contains("<thought>"),
        "{}",
        grammar(&off_fake)
    );
    assert_eq!(calls(&on), calls(&off));
}
