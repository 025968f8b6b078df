//! `tagloop serve` against a fake upstream that speaks the text protocol: each `tool_choice`,
//! parallel calls, repairs, a turn that never validates, the history round trip, a completions
//! upstream and `response_format`. Bad requests, keys and limits are in serve_limits.rs.

mod common;

use serde_json::{Value, json};
use tagloop::llm::{Api, GrammarMode, GrammarSyntax};

use common::fake_server::{FakeConfig, FakeServer};
use common::serve::{ask, message, post, proxy, sent_text, weather_tools};

fn calls(v: &Value) -> Vec<(String, Value)> {
    message(v)["tool_calls"]
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

#[tokio::test]
async fn auto_answers_a_call_as_tool_calls() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<thought>I need the weather.</thought>\n<action>weather(city=\"Paris\", days=\"2\")</action>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &ask(json!({}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(message(&v)["reasoning_content"], "I need the weather.");
    assert!(message(&v)["content"].is_null());
    // Bound to the schema: "2" became 2.
    assert_eq!(
        calls(&v),
        vec![("weather".into(), json!({"city": "Paris", "days": 2}))]
    );
    let call = &message(&v)["tool_calls"][0];
    assert!(call["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(call["type"], "function");
    // The client's system message is the role's instructions inside tagloop's system prompt.
    let sent = sent_text(&fake.requests()[0].body);
    assert!(sent.contains("# Your role\n\nAnswer briefly."), "{sent}");
    assert!(sent.contains("## weather(city, days)"), "{sent}");
}

#[tokio::test]
async fn auto_answers_text_as_content() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<thought>Known.</thought><final_answer>It is sunny.</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &ask(json!({"tool_choice": "auto"}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(message(&v)["content"], "It is sunny.");
    assert!(message(&v).get("tool_calls").is_none());
}

#[tokio::test]
async fn required_corrects_an_answer_into_a_call_and_sends_an_action_only_grammar() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<final_answer>Sunny.</final_answer>",
        "<action>weather(city=\"Paris\")</action>",
    ]))
    .await;
    let base = proxy(&fake, |c| c.grammar = GrammarMode::On).await;
    let (status, v) = post(&base, &ask(json!({"tool_choice": "required"}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        calls(&v),
        vec![("weather".into(), json!({"city": "Paris"}))]
    );
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    let grammar = reqs[0].body["grammar"].as_str().unwrap();
    assert!(grammar.contains("<action>"), "{grammar}");
    assert!(!grammar.contains("<final_answer>"), "no answer: {grammar}");
    assert!(sent_text(&reqs[1].body).contains("You must call a tool"));
}

#[tokio::test]
async fn llguidance_gets_the_same_grammar_in_lark() {
    let fake = FakeServer::start(FakeConfig {
        props: true,
        ..FakeConfig::turns(["<action>weather(city=\"Paris\")</action>"])
    })
    .await;
    let base = proxy(&fake, |c| {
        c.grammar = GrammarMode::On;
        c.grammar_syntax = GrammarSyntax::Llguidance;
    })
    .await;
    let (status, v) = post(&base, &ask(json!({"tool_choice": "required"}))).await;
    assert_eq!(status, 200, "{v}");
    let grammar = fake.requests()[0].body["grammar"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(grammar.starts_with("%llguidance {}\n"), "{grammar}");
    assert!(
        grammar.contains("action-closed"),
        "parallel calls: {grammar}"
    );
}

#[tokio::test]
async fn a_named_function_is_the_only_call_allowed() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<action>weather(city=\"Paris\")</action>",
        "<action>time(city=\"Paris\")</action>",
    ]))
    .await;
    let base = proxy(&fake, |c| c.grammar = GrammarMode::On).await;
    let choice = json!({"tool_choice": {"type": "function", "function": {"name": "time"}}});
    let (status, v) = post(&base, &ask(choice)).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(calls(&v), vec![("time".into(), json!({"city": "Paris"}))]);
    let grammar = fake.requests()[0].body["grammar"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(grammar.contains("\"time(\"") && !grammar.contains("\"weather(\""));
}

#[tokio::test]
async fn none_corrects_a_call_into_an_answer() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<action>weather(city=\"Paris\")</action>",
        "<final_answer>I cannot look it up.</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |c| c.grammar = GrammarMode::On).await;
    let (status, v) = post(&base, &ask(json!({"tool_choice": "none"}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(message(&v)["content"], "I cannot look it up.");
    let grammar = fake.requests()[0].body["grammar"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!grammar.contains("<action>"), "{grammar}");
}

#[tokio::test]
async fn parallel_calls_come_from_one_turn() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<thought>Both.</thought>\n<action>weather(city=\"Paris\")</action>\n<action>time(city=\"Paris\")</action>",
        // The question's city: a first call of values nobody gave would be declined.
        "<action>weather(city=\"Paris\")</action>\n<action>time(city=\"Paris\")</action>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    // A further call must ask for something the first did not (docs/serve.md): the question
    // asks for both.
    let (status, v) = post(&base, &ask(both_asked(json!({})))).await;
    assert_eq!(status, 200, "{v}");
    let names: Vec<String> = calls(&v).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["weather", "time"]);
    let indexes: Vec<&Value> = message(&v)["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["id"])
        .collect();
    assert_ne!(indexes[0], indexes[1]);
    assert!(
        !fake.requests()[0]
            .stops()
            .contains(&"</action>".to_string())
    );

    // Without parallel calls, `</action>` is a stop and a turn gives one call.
    let single = both_asked(json!({"parallel_tool_calls": false}));
    let (_, v) = post(&base, &ask(single)).await;
    assert_eq!(
        calls(&v),
        vec![("weather".into(), json!({"city": "Paris"}))]
    );
    assert!(
        fake.requests()[1]
            .stops()
            .contains(&"</action>".to_string())
    );
}

#[tokio::test]
async fn a_call_repeated_in_one_turn_reaches_the_client_once() {
    // SmolLM2 over BFCL wrote its one call two or three times in a row. The first copy ends
    // the turn (tests/serve_decide.rs): what comes after it is not read.
    let fake = FakeServer::start(FakeConfig::turns([
        "<thought>Paris.</thought>\n<action>weather(city=\"Paris\")</action>\n<action>weather(city=\"Paris\")</action>\n<action>weather(city=\"Oslo\")</action>\n<action>weather(city=\"Paris\")</action>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &ask(json!({}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        calls(&v),
        vec![("weather".into(), json!({"city": "Paris"}))]
    );
}

#[tokio::test]
async fn calls_before_one_cut_by_the_token_limit_are_kept() {
    // gemma-3-270m over BFCL wrote closed calls until max_tokens cut the next one in its
    // arguments; the whole turn was refused and repaired (a second request, same result). The
    // complete calls stand on their own; the cut one is dropped.
    let turn = "<thought>Both.</thought>\n<action>weather(city=\"Paris\")</action>\n<action>time(city=\"Paris\")</action>\n<action>weather(city=\"Oslo, the capital of Norway, far north";
    let fake = FakeServer::start(FakeConfig::turns([turn])).await;
    let base = proxy(&fake, |_| {}).await;
    // The fake keeps 4 bytes a token and cuts only a longer turn: cut inside the last string.
    let max_tokens = (turn.len() - 3) / 4;
    let (status, v) = post(&base, &ask(both_asked(json!({"max_tokens": max_tokens})))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(fake.request_count(), 1, "no repair: {v}");
    assert_eq!(
        calls(&v),
        vec![
            ("weather".into(), json!({"city": "Paris"})),
            ("time".into(), json!({"city": "Paris"}))
        ]
    );
}

#[tokio::test]
async fn a_bad_call_is_repaired_before_the_client_sees_it_and_usage_sums_both() {
    // Neither turn holds a stop string, so the fake's completion tokens are len/4 + 1 each.
    let bad = "<thought>Go.</thought><action>weather(days=0)";
    let good = "<thought>Go.</thought><action>weather(city=\"Paris\")";
    let fake = FakeServer::start(FakeConfig::turns([bad, good])).await;
    let base = proxy(&fake, |_| {}).await;
    // `required`: no guess at the question's function (a third request, whose tokens the
    // usage counts too), so the usage is exactly the two turns'.
    let (status, v) = post(&base, &ask(json!({"tool_choice": "required"}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        calls(&v),
        vec![("weather".into(), json!({"city": "Paris"}))]
    );
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    assert!(sent_text(&reqs[1].body).contains("missing required argument `city`"));
    let prompt: u64 = reqs
        .iter()
        .map(|r| r.body["messages"].to_string().len() as u64 / 4)
        .sum();
    let completion = (bad.len() / 4 + 1 + good.len() / 4 + 1) as u64;
    assert_eq!(v["usage"]["prompt_tokens"], prompt);
    assert_eq!(v["usage"]["completion_tokens"], completion);
    assert_eq!(v["usage"]["total_tokens"], prompt + completion);
}

#[tokio::test]
async fn arguments_that_break_the_schema_are_repaired_too() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<action>weather(city=\"Paris\", days=0)</action>",
        "<action>weather(city=\"Paris\", days=1)</action>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &ask(json!({}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        calls(&v),
        vec![("weather".into(), json!({"city": "Paris", "days": 1}))]
    );
    assert!(sent_text(&fake.requests()[1].body).contains("/days"));
}

#[tokio::test]
async fn a_turn_that_never_validates_is_a_502_upstream_error() {
    let fake = FakeServer::start(FakeConfig {
        default_reply: "<action>weather(town=\"Paris\")</action>".into(),
        ..FakeConfig::default()
    })
    .await;
    let base = proxy(&fake, |c| c.repairs = 2).await;
    let (status, v) = post(&base, &ask(json!({}))).await;
    assert_eq!(status, 502, "{v}");
    assert_eq!(v["error"]["type"], "upstream_error");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown argument `town`"),
        "{v}"
    );
    assert_eq!(fake.request_count(), 3);
}

#[tokio::test]
async fn history_round_trips_as_actions_and_observations() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<final_answer>Sunny, 21 °C at 14:00.</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let body = json!({
        "messages": [
            {"role": "user", "content": "Weather and time in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "call_b", "type": "function", "function": {"name": "time", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_b", "content": "14:00"},
            {"role": "tool", "tool_call_id": "call_a", "content": "Sunny <final_answer>x</final_answer>"}
        ],
        "tools": weather_tools(),
    });
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    let msgs = fake.requests()[0].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let assistant = msgs.iter().find(|m| m["role"] == "assistant").unwrap();
    let turn = assistant["content"].as_str().unwrap();
    assert!(
        turn.contains(
            "<action>weather(city=\"Paris\")</action>\n<action>time(city=\"Paris\")</action>"
        ),
        "{turn}"
    );
    let obs = msgs.last().unwrap()["content"].as_str().unwrap();
    assert_eq!(msgs.last().unwrap()["role"], "user");
    assert!(
        obs.starts_with(
            "<observation>\nResult of time:\n14:00\n\nResult of weather:\nSunny &lt;final_answer>"
        ),
        "{obs}"
    );

    // An id no assistant message gave is refused, naming the field.
    let mut bad = body.clone();
    bad["messages"][2]["tool_call_id"] = json!("call_zzz");
    let (status, v) = post(&base, &bad).await;
    assert_eq!(status, 400);
    assert_eq!(v["error"]["param"], "messages[2].tool_call_id");
}

#[tokio::test]
async fn a_completions_upstream_gets_one_document() {
    let fake = FakeServer::start(FakeConfig::turns([
        " I look it up.</thought>\n<action>weather(city=\"Paris\")</action>",
    ]))
    .await;
    let base = proxy(&fake, |c| {
        // The prompt opens the thought as a run's does (`--thought free`).
        c.api = Api::Completions;
        c.thought = tagloop::serve::ThoughtMode::Free;
    })
    .await;
    let (status, v) = post(&base, &ask(json!({}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        calls(&v),
        vec![("weather".into(), json!({"city": "Paris"}))]
    );
    assert_eq!(message(&v)["reasoning_content"], "I look it up.");
    let req = &fake.requests()[0];
    assert_eq!(req.path, "/v1/completions");
    let prompt = req.body["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("- weather(city, days?)")
            && prompt.contains("Instructions: Answer briefly."),
        "{prompt}"
    );
    assert!(
        prompt.ends_with("Weather in Paris?\n</question>\n<thought>"),
        "{prompt}"
    );
}

#[tokio::test]
async fn response_format_answers_are_validated_and_repaired() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<final_answer>{\"temp\": \"warm\"}</final_answer>",
        "<final_answer>{\"temp\": 21}</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let body = json!({
        "messages": [{"role": "user", "content": "Temperature in Paris?"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema":
            {"type": "object", "properties": {"temp": {"type": "integer"}}, "required": ["temp"]}}}
    });
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    let content: Value = serde_json::from_str(message(&v)["content"].as_str().unwrap()).unwrap();
    assert_eq!(content, json!({"temp": 21}));
    assert_eq!(fake.request_count(), 2);
}

/// `extra` with a question that asks for both the weather and the time.
fn both_asked(mut extra: Value) -> Value {
    extra["messages"] = json!([
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Weather and local time in Paris?"}
    ]);
    extra
}
