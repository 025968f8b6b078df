//! `tagloop serve --thought none` (the default) against a fake upstream: the turns that may
//! call have no thought (the grammar begins at the decision, and the prompt, chat or
//! completions, teaches none), while `--thought free` keeps both as a run has them; the answer after a declined call still
//! begins its thought in the runtime's words; and an upstream that takes no grammar and writes
//! a thought anyway is read as before.

mod common;

use common::fake_server::{FakeConfig, FakeGuess, FakeServer};
use common::serve::{ask, message, post, proxy};
use serde_json::{Value, json};
use tagloop::llm::{Api, GrammarMode};
use tagloop::prompt::DECLINED_THOUGHT;
use tagloop::serve::ThoughtMode;

const CALL: &str = "<action>weather(city=\"Paris\")</action>";

fn grammar(body: &Value) -> &str {
    body["grammar"].as_str().unwrap_or_default()
}

/// The system message of an upstream chat request.
fn system(body: &Value) -> &str {
    body["messages"][0]["content"].as_str().unwrap_or_default()
}

fn the_call(v: &Value) -> (String, Value) {
    let call = &message(v)["tool_calls"][0]["function"];
    let args = call["arguments"].as_str().unwrap_or_default();
    (
        call["name"].as_str().unwrap_or_default().to_string(),
        serde_json::from_str(args).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn under_none_the_calling_turn_has_no_thought_in_its_grammar_or_its_prompt() {
    let fake = FakeServer::start(FakeConfig::turns([CALL])).await;
    let base = proxy(&fake, |c| {
        c.grammar = GrammarMode::On;
        c.thought = ThoughtMode::None;
    })
    .await;
    let (status, v) = post(&base, &ask(json!({}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(the_call(&v), ("weather".into(), json!({"city": "Paris"})));
    assert!(message(&v).get("reasoning_content").is_none(), "{v}");
    let body = &fake.requests()[0].body;
    let g = grammar(body);
    assert!(
        g.contains("<action>") && g.contains("<final_answer>"),
        "{g}"
    );
    assert!(
        !g.contains("<thought>") && !g.contains("thought-word"),
        "{g}"
    );
    let sent = system(body);
    assert!(!sent.contains("<thought>"), "{sent}");
    assert!(sent.contains("\n\nWrite exactly one of:\n\n"), "{sent}");
    assert!(
        sent.contains("<question>Who wrote Hamlet?</question>\n<final_answer>"),
        "{sent}"
    );
}

#[tokio::test]
async fn under_free_the_thought_is_in_the_grammar_and_the_prompt_as_a_run_has_it() {
    // The default is `none` (measured better on BFCL); the config's default says so.
    assert_eq!(
        tagloop::serve::ServeConfig::new("http://x").thought,
        ThoughtMode::None
    );
    let fake = FakeServer::start(FakeConfig::turns([format!(
        "<thought>I look it up.</thought>\n{CALL}"
    )]))
    .await;
    let base = proxy(&fake, |c| {
        c.grammar = GrammarMode::On;
        c.thought = ThoughtMode::Free;
    })
    .await;
    let (status, v) = post(&base, &ask(json!({}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(message(&v)["reasoning_content"], "I look it up.");
    let body = &fake.requests()[0].body;
    let g = grammar(body);
    assert!(g.starts_with("root ::= (\"<thought>\" thought)?"), "{g}");
    let sent = system(body);
    assert!(
        sent.contains(
            "Write your reasoning for this step in a <thought> block, then exactly one of:"
        ),
        "{sent}"
    );
    assert!(
        sent.contains("<thought>None of my tools is about this, so I answer directly.</thought>"),
        "{sent}"
    );
}

#[tokio::test]
async fn under_none_a_past_call_shows_no_thought_unless_the_client_sent_one() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<final_answer>Sunny.</final_answer>",
        "<final_answer>Sunny.</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |c| c.thought = ThoughtMode::None).await;
    let past = |reasoning: Option<&str>| {
        let mut said = json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
            "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}]});
        if let Some(r) = reasoning {
            said["reasoning_content"] = json!(r);
        }
        ask(json!({"messages": [
            {"role": "user", "content": "Weather in Paris?"},
            said,
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"}
        ]}))
    };
    for reasoning in [None, Some("The weather tool knows.")] {
        let (status, v) = post(&base, &past(reasoning)).await;
        assert_eq!(status, 200, "{v}");
    }
    let reqs = fake.requests();
    let turn = |i: usize| reqs[i].body["messages"][2]["content"].clone();
    assert_eq!(turn(0), json!(CALL));
    // The client's own reasoning is its message's, and is kept.
    assert_eq!(
        turn(1),
        json!(format!(
            "<thought>The weather tool knows.</thought>\n{CALL}"
        ))
    );
}

#[tokio::test]
async fn under_none_a_completions_document_opens_no_thought() {
    let fake = FakeServer::start(FakeConfig::turns([CALL])).await;
    let base = proxy(&fake, |c| {
        c.grammar = GrammarMode::On;
        c.api = Api::Completions;
        c.thought = ThoughtMode::None;
    })
    .await;
    let (status, v) = post(&base, &ask(json!({}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(the_call(&v), ("weather".into(), json!({"city": "Paris"})));
    let body = &fake.requests()[0].body;
    let prompt = body["prompt"].as_str().unwrap_or_default();
    assert!(prompt.ends_with("</question>\n"), "{prompt}");
    assert!(!prompt.contains("<thought>"), "{prompt}");
    // No thought was opened, so there is none to close either.
    let g = grammar(body);
    assert!(!g.contains("thought"), "{g}");
}

#[tokio::test]
async fn without_a_grammar_a_thought_written_anyway_is_read_as_before() {
    // A server that takes no grammar: nothing holds the model to the prompt's shape.
    for api in [Api::Chat, Api::Completions] {
        let fake = FakeServer::start(FakeConfig::turns([format!(
            "<thought>I look it up.</thought>\n{CALL}"
        )]))
        .await;
        let base = proxy(&fake, |c| {
            c.api = api;
            c.thought = ThoughtMode::None;
        })
        .await;
        let (status, v) = post(&base, &ask(json!({}))).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(the_call(&v), ("weather".into(), json!({"city": "Paris"})));
        assert_eq!(message(&v)["reasoning_content"], "I look it up.", "{api:?}");
    }
}

fn bmi() -> Value {
    json!([{"type": "function", "function": {"name": "determine_body_mass_index",
        "description": "Calculate body mass index given weight and height.",
        "parameters": {"type": "object", "properties": {
            "weight": {"type": "number"}, "height": {"type": "number"}},
          "required": ["weight", "height"]}}}])
}

/// The fake's turns: a call the guess declines (it answers after the turn, so the call is
/// written and read), then `answer`.
async fn declining(answer: &str) -> FakeServer {
    FakeServer::start(FakeConfig {
        guess: FakeGuess {
            reply: Some("triangle_area".into()),
            delay: std::time::Duration::from_millis(400),
            ..FakeGuess::default()
        },
        ..FakeConfig::turns([
            "<action>determine_body_mass_index(weight=10, height=5)</action>",
            answer,
        ])
    })
    .await
}

fn triangle() -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content":
        "Calculate the area of a triangle given the base is 10 meters and height is 5 meters."}],
        "tools": bmi()})
}

#[tokio::test]
async fn under_none_a_declined_calls_answer_still_begins_in_the_runtimes_words() {
    let answer = format!(
        "<thought>{DECLINED_THOUGHT} half of 50.</thought>\n<final_answer>25 square meters.</final_answer>"
    );
    let fake = declining(&answer).await;
    let base = proxy(&fake, |c| {
        c.grammar = GrammarMode::On;
        c.thought = ThoughtMode::None;
    })
    .await;
    let (status, v) = post(&base, &triangle()).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(message(&v)["content"], "25 square meters.");
    assert_eq!(
        message(&v)["reasoning_content"],
        format!("{DECLINED_THOUGHT} half of 50.")
    );
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    assert!(!grammar(&reqs[0].body).contains("thought"));
    let again = grammar(&reqs[1].body);
    let begun = format!("\"<thought>{DECLINED_THOUGHT}\" thought-word+ thought-end");
    assert!(again.contains(&begun), "{again}");
    assert!(!again.contains("<action>"), "{again}");
}

#[tokio::test]
async fn under_none_without_a_grammar_a_completions_answer_continues_from_the_opened_words() {
    // The document opened no thought: the runtime's words come with their tag, and the
    // upstream writes only what follows them.
    let rest = " half of 50.</thought>\n<final_answer>25 square meters.</final_answer>";
    let fake = declining(rest).await;
    let base = proxy(&fake, |c| {
        c.api = Api::Completions;
        c.thought = ThoughtMode::None;
    })
    .await;
    let (status, v) = post(&base, &triangle()).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(message(&v)["content"], "25 square meters.");
    assert_eq!(
        message(&v)["reasoning_content"],
        format!("{DECLINED_THOUGHT} half of 50.")
    );
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    let (first, again) = (
        reqs[0].body["prompt"].as_str().unwrap_or_default(),
        reqs[1].body["prompt"].as_str().unwrap_or_default(),
    );
    assert_eq!(again, format!("{first}<thought>{DECLINED_THOUGHT}"));
}

/// `POST /v1/messages/count_tokens` counts the prompt serve would send: under `none` the one
/// without the thought's lines, shorter than the default's.
#[tokio::test]
async fn count_tokens_counts_the_prompt_of_the_mode() {
    let fake = FakeServer::start(FakeConfig {
        props: true,
        tokenizer: true,
        ..FakeConfig::default()
    })
    .await;
    let body = json!({"model": "m", "max_tokens": 100,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"name": "weather", "description": "Weather of a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]}}]});
    let mut counts = Vec::new();
    for mode in [ThoughtMode::Free, ThoughtMode::None] {
        let base = proxy(&fake, |c| c.thought = mode).await;
        let r = reqwest::Client::new()
            .post(format!("{base}/messages/count_tokens"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["x-tagloop-token-count"], "tokenizer");
        let v: Value = r.json().await.unwrap();
        counts.push(v["input_tokens"].as_u64().unwrap());
    }
    assert!(counts[1] < counts[0], "{counts:?}");
    assert_eq!(fake.request_count(), 0, "no turn is asked for");
}
