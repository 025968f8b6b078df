//! Context fitting in `tagloop serve` (`src/serve/fit.rs`), against the fake llama.cpp server,
//! which states a small window in `/props`, counts tokens at `/tokenize`, and refuses with
//! llama.cpp's 400 any request over its window (`enforce_window`): a client's conversation with
//! long tool results is fitted as a run's history is and answered; a question that cannot fit
//! gets OpenAI's 400 `context_length_exceeded` and never reaches the upstream; an upstream that
//! refuses a prompt the proxy could not measure gets it once more, fitted to the window its
//! refusal named; one that refuses every prompt as too long is a 400, not a 502.

mod common;

use common::fake_server::{ContextShape, FakeConfig, FakeServer};
use common::serve::{post, proxy, weather_tools};
use serde_json::{Value, json};

/// The window of the fake upstream, in its tokens (4 bytes each).
const WINDOW: u64 = 2048;
/// The turn budget every request asks for.
const BUDGET: u64 = 200;
const ANSWER: &str = "<thought>Read.</thought>\n<final_answer>It rained on Monday.</final_answer>";

/// A tool result of `lines` numbered lines of about 60 bytes.
fn log(name: &str, lines: usize) -> String {
    (1..=lines)
        .map(|i| format!("{name} line {i:04}: the station logged rain and wind today.\n"))
        .collect()
}

/// The fake llama.cpp upstream, with this window known to `/props` or not.
async fn upstream(props: bool) -> FakeServer {
    FakeServer::start(FakeConfig {
        props,
        props_n_ctx: WINDOW,
        tokenizer: props,
        enforce_window: true,
        turns: vec![ANSWER.into()],
        ..FakeConfig::default()
    })
    .await
}

/// Two calls of `weather` whose results are long logs, then the latest question.
fn long_conversation() -> Value {
    let call = |id: &str, city: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": "weather", "arguments": json!({"city": city}).to_string()}}]})
    };
    json!({"model": "m", "tools": weather_tools(), "max_tokens": BUDGET, "messages": [
        {"role": "user", "content": "How was the weather in Oslo this week?"},
        call("call_a", "Oslo"),
        {"role": "tool", "tool_call_id": "call_a", "content": log("oslo", 120)},
        {"role": "user", "content": "And in Bergen? When did it rain there?"},
        call("call_b", "Bergen"),
        {"role": "tool", "tool_call_id": "call_b", "content": log("bergen", 120)},
    ]})
}

/// The prompt's text as the upstream got it (every message's content).
fn sent_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter_map(|m| m["content"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn long_tool_results_are_cut_and_the_request_is_answered() {
    let fake = upstream(true).await;
    let sessions = tempfile::tempdir().unwrap();
    let dir = sessions.path().to_path_buf();
    let base = proxy(&fake, move |c| c.session_dir = Some(dir)).await;
    let body = long_conversation();
    let whole: usize = log("oslo", 120).len() + log("bergen", 120).len();
    assert!(
        whole as u64 / 4 > WINDOW,
        "the results alone overflow the window"
    );

    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "It rained on Monday."
    );
    assert_eq!(fake.refused(), 0, "nothing over the window was sent");

    let sent: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .collect();
    assert_eq!(sent.len(), 1);
    let prompt = FakeServer::prompt_tokens(&sent[0].body);
    let max_tokens = sent[0].body["max_tokens"].as_u64().unwrap();
    assert!(prompt + max_tokens <= WINDOW, "{prompt} + {max_tokens}");
    let text = sent_text(&sent[0].body);
    // The results keep a head and a tail around the run's marker.
    assert!(
        text.contains("cut here to fit the context window"),
        "{text}"
    );
    assert!(text.contains("bergen line 0001") && text.contains("bergen line 0120"));
    assert!(!text.contains("bergen line 0060"), "the middle was cut");
    // The questions and the tools are whole.
    assert!(text.contains("How was the weather in Oslo this week?"));
    assert!(text.contains("And in Bergen? When did it rain there?"));
    assert!(
        text.contains("Local time of a city."),
        "the tools are in the system prompt"
    );

    // The transcript records the fitting.
    let file = std::fs::read_dir(sessions.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let record: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let fitted = &record["fitted"][0];
    assert_eq!(fitted["type"], "context_fitted", "{record}");
    assert_eq!(fitted["window"], WINDOW);
    assert!(
        fitted["observations_cut"].as_u64().unwrap() >= 1,
        "{fitted}"
    );
}

#[tokio::test]
async fn a_question_too_long_to_fit_is_a_400_and_never_sent() {
    let fake = upstream(true).await;
    let base = proxy(&fake, |_| {}).await;
    let question = format!(
        "Summarise this report:\n{}",
        log("report", 160) // about 9.6 KB: 2,400 tokens, more than the window
    );
    let body = json!({"model": "m", "tools": weather_tools(), "max_tokens": BUDGET,
        "messages": [{"role": "user", "content": question}]});

    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert_eq!(v["error"]["code"], "context_length_exceeded");
    assert_eq!(v["error"]["param"], "messages");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("2048 tokens"), "{message}");
    let completions = fake
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .count();
    assert_eq!(completions, 0, "a question is never cut and sent");
}

#[tokio::test]
async fn a_refusal_names_the_window_and_the_retry_fits_it() {
    // No `/props`, no tokenizer: the proxy does not know the window until the upstream's 400
    // names it.
    let fake = upstream(false).await;
    let base = proxy(&fake, |_| {}).await;

    let (status, v) = post(&base, &long_conversation()).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "It rained on Monday."
    );
    assert_eq!(fake.refused(), 1, "refused once, then fitted");
    let sent: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .collect();
    let last = sent.last().unwrap();
    assert!(sent_text(&last.body).contains("cut here to fit the context window"));
}

#[tokio::test]
async fn an_upstream_that_refuses_every_prompt_as_too_long_is_a_400_not_a_502() {
    // vLLM's words: "maximum context length is 2048 tokens. However, you requested 3000".
    let fake = FakeServer::start(FakeConfig {
        context_error: Some(ContextShape::Vllm),
        ..FakeConfig::default()
    })
    .await;
    let base = proxy(&fake, |_| {}).await;
    let body = json!({"model": "m", "tools": weather_tools(),
        "messages": [{"role": "user", "content": "Weather in Oslo?"}]});

    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["code"], "context_length_exceeded");
    // One refusal, then at most the one retry fitted harder: never a loop.
    let completions = fake
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .count();
    assert!((1..=2).contains(&completions), "{completions} requests");
}
