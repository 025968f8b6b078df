//! The answer after serve declines a turn's calls (`src/serve/answer.rs`), against a fake
//! upstream: the same prompt is asked again for an answer only, and that answer's thought
//! begins in the runtime's words ([`DECLINED_THOUGHT`]), the model going on from them: asked
//! again at temperature 0, a small model writes the thought that led to the calls and answers
//! after it (issue 31: the 1.5B's "yellow" for blue and yellow paint). Under a grammar the
//! grammar writes them; without one, an upstream that continues a turn (completions, or chat
//! with prefill) is asked to continue from them; one that does not is asked as before. The
//! transcript still records the declined turn and its judgement.

mod common;

use common::fake_server::{FakeConfig, FakeGuess, FakeServer};
use common::serve::{post, proxy, the_transcript};
use serde_json::{Value, json};
use tagloop::llm::{Api, GrammarMode};
use tagloop::prompt::DECLINED_THOUGHT;

fn bmi() -> Value {
    json!([{"type": "function", "function": {"name": "determine_body_mass_index",
        "description": "Calculate body mass index given weight and height.",
        "parameters": {"type": "object", "properties": {
            "weight": {"type": "number"}, "height": {"type": "number"}},
          "required": ["weight", "height"]}}}])
}

const TRIANGLE: &str =
    "Calculate the area of a triangle given the base is 10 meters and height is 5 meters.";
const WRONG_CALL: &str = "<thought>I use the tool.</thought>\n<action>determine_body_mass_index(weight=10, height=5)</action>";

/// The fake's turns: the call the guess declines, then `answer`. The guess answers after the
/// turn (it is sent beside it: answering first, it would drop the turn before its call, which
/// `serve_guess.rs` tests), so the call is written, read and declined.
async fn upstream(answer: &str, props: bool) -> FakeServer {
    FakeServer::start(FakeConfig {
        props,
        guess: FakeGuess {
            reply: Some("triangle_area".into()),
            delay: std::time::Duration::from_millis(400),
            ..FakeGuess::default()
        },
        ..FakeConfig::turns([WRONG_CALL, answer])
    })
    .await
}

fn question() -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": TRIANGLE}], "tools": bmi()})
}

fn grammar(body: &Value) -> &str {
    body["grammar"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn under_a_grammar_the_answer_after_a_decline_begins_its_thought_in_the_runtimes_words() {
    let answer = format!(
        "<thought>{DECLINED_THOUGHT} base times height, halved.</thought>\n<final_answer>25 square meters.</final_answer>"
    );
    let fake = upstream(&answer, false).await;
    let dir = tempfile::tempdir().unwrap();
    let base = proxy(&fake, |c| {
        c.grammar = GrammarMode::On;
        c.session_dir = Some(dir.path().to_path_buf());
    })
    .await;
    let (status, v) = post(&base, &question()).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "25 square meters.");
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    assert!(!grammar(&reqs[0].body).contains(DECLINED_THOUGHT));
    let again = grammar(&reqs[1].body);
    let begun = format!("\"<thought>{DECLINED_THOUGHT}\" thought-word+ thought-end");
    assert!(again.contains(&begun), "{again}");
    assert!(!again.contains("<action>"), "{again}");
    // The declined turn and its judgement are kept.
    let t = the_transcript(dir.path());
    assert_eq!(t["decisions"][0]["declined"], true, "{t}");
    assert!(
        t.to_string()
            .contains("determine_body_mass_index(weight=10"),
        "{t}"
    );
}

#[tokio::test]
async fn without_a_grammar_a_completions_upstream_continues_from_the_runtimes_words() {
    // The upstream writes only what follows them.
    let rest =
        " base times height, halved.</thought>\n<final_answer>25 square meters.</final_answer>";
    let fake = upstream(rest, false).await;
    let base = proxy(&fake, |c| {
        // The prompt opens the thought (`--thought free`): the runtime's words go inside it.
        c.api = Api::Completions;
        c.thought = tagloop::serve::ThoughtMode::Free;
    })
    .await;
    let (status, v) = post(&base, &question()).await;
    assert_eq!(status, 200, "{v}");
    let message = &v["choices"][0]["message"];
    assert_eq!(message["content"], "25 square meters.");
    assert_eq!(
        message["reasoning_content"],
        format!("{DECLINED_THOUGHT} base times height, halved.")
    );
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    let (first, again) = (
        reqs[0].body["prompt"].as_str().unwrap(),
        reqs[1].body["prompt"].as_str().unwrap(),
    );
    assert_eq!(again, format!("{first}{DECLINED_THOUGHT}"));
}

#[tokio::test]
async fn without_a_grammar_a_chat_upstream_that_takes_prefill_continues_from_them() {
    // `props`: the fake says it is llama.cpp, which continues a last assistant message.
    let rest = " half of 50.</thought>\n<final_answer>25 square meters.</final_answer>";
    let fake = upstream(rest, true).await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &question()).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "25 square meters.");
    let reqs = fake.requests();
    let messages = reqs.last().unwrap().body["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "assistant", "{last}");
    assert_eq!(last["content"], format!("<thought>{DECLINED_THOUGHT}"));
}

#[tokio::test]
async fn an_answer_cut_inside_the_begun_thought_is_continued_without_its_words_again() {
    // gemma base went on with the runtime's words until the token budget cut the thought; the
    // continuation must not be held to write them once more.
    let rambling = format!("<thought>{DECLINED_THOUGHT} {}", "10 meters, ".repeat(20));
    let fake = FakeServer::start(FakeConfig {
        guess: FakeGuess {
            reply: Some("triangle_area".into()),
            ..FakeGuess::default()
        },
        ..FakeConfig::turns([
            WRONG_CALL,
            rambling.as_str(),
            "<final_answer>25 square meters.</final_answer>",
        ])
    })
    .await;
    let base = proxy(&fake, |c| {
        c.grammar = GrammarMode::On;
        c.api = Api::Completions;
    })
    .await;
    let mut body = question();
    body["max_tokens"] = json!(40);
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "25 square meters.");
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 3);
    assert!(grammar(&reqs[1].body).contains(DECLINED_THOUGHT));
    let continued = grammar(&reqs[2].body);
    assert!(!continued.contains(DECLINED_THOUGHT), "{continued}");
    assert!(!continued.contains("<action>"), "{continued}");
    let prompt = reqs[2].body["prompt"].as_str().unwrap();
    assert!(prompt.contains(DECLINED_THOUGHT), "{prompt}");
}
