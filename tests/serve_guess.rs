//! Serve's guess at a question's function (`src/serve/guess.rs`), against a fake upstream:
//! under `tool_choice: auto`, a first call the grounding keeps is judged by the model's own
//! guess, asked in a short request of the question alone. A guess that shares no word with the
//! called tool declines the turn for a text answer; one that shares a word keeps the call; a
//! guess the upstream fails, or one that runs past its own `guess_timeout`, keeps the call;
//! without one the guess has the request's time limit; the request is bounded (16 tokens, a
//! grammar of one name where grammars are sent); nothing is asked after results or under
//! `required`. The transcript records every judgement, kept or declined.

mod common;

use std::time::{Duration, Instant};

use common::fake_server::{FakeConfig, FakeGuess, FakeServer};
use common::serve::{post, proxy, the_transcript};
use serde_json::{Value, json};
use tagloop::llm::GrammarMode;

/// BFCL irrelevance 0's one tool.
fn bmi() -> Value {
    json!([{"type": "function", "function": {"name": "determine_body_mass_index",
        "description": "Calculate body mass index given weight and height.",
        "parameters": {"type": "object", "properties": {
            "weight": {"type": "number", "description": "Weight of the individual in kilograms."},
            "height": {"type": "number", "description": "Height of the individual in meters."}},
          "required": ["weight", "height"]}}}])
}

const TRIANGLE: &str =
    "Calculate the area of a triangle given the base is 10 meters and height is 5 meters.";

/// The 0.5B's turn on it: the one tool, filled with the question's own numbers (grounded).
const WRONG_CALL: &str = "<thought>I use the tool.</thought>\n<action>determine_body_mass_index(weight=10, height=5)</action>";

fn question(q: &str) -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": q}], "tools": bmi()})
}

fn fake(guess: FakeGuess) -> FakeConfig {
    FakeConfig {
        guess,
        ..FakeConfig::turns([
            WRONG_CALL,
            "<thought>No tool does areas.</thought>\n<final_answer>25 square meters.</final_answer>",
        ])
    }
}

fn guess(name: &str) -> FakeGuess {
    FakeGuess {
        reply: Some(name.to_string()),
        ..FakeGuess::default()
    }
}

fn call_names(v: &Value) -> Vec<String> {
    v["choices"][0]["message"]["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_call_whose_tool_shares_no_word_with_the_guess_is_declined_for_an_answer() {
    let fake = FakeServer::start(fake(guess("triangle_area"))).await;
    let base = proxy(&fake, |c| c.grammar = GrammarMode::On).await;
    let (status, v) = post(&base, &question(TRIANGLE)).await;
    assert_eq!(status, 200, "{v}");
    assert!(call_names(&v).is_empty(), "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "25 square meters.");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    // The turn, then the same prompt asked for an answer only; the guess apart, asked once,
    // of the question alone: no tools, no protocol.
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body["messages"], reqs[1].body["messages"]);
    let guesses = fake.guesses();
    assert_eq!(guesses.len(), 1);
    let asked = guesses[0]["messages"].to_string();
    assert!(asked.contains(TRIANGLE), "{asked}");
    assert!(!asked.contains("determine_body_mass_index"), "{asked}");
    assert!(guesses[0].get("tools").is_none());
}

#[tokio::test]
async fn a_call_whose_tool_shares_a_word_with_the_guess_is_kept() {
    // "body mass index" in the guess; also a parameter's description ("kilograms") counts.
    for name in ["body_mass_index", "convert_kilograms"] {
        let fake = FakeServer::start(fake(guess(name))).await;
        let base = proxy(&fake, |_| {}).await;
        let (status, v) = post(
            &base,
            &question("What is the body mass index of someone of 10 kilograms and 5 m?"),
        )
        .await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(
            call_names(&v),
            vec!["determine_body_mass_index"],
            "{name}: {v}"
        );
        assert_eq!(fake.request_count(), 1);
        assert_eq!(fake.guesses().len(), 1);
    }
}

#[tokio::test]
async fn a_guess_that_names_nothing_the_question_says_keeps_the_call() {
    // SmolLM2-135M's kind of guess: a name about nothing in the question says nothing about
    // the called tool either, so the (grounded) call goes through.
    let fake = FakeServer::start(fake(guess("process_data"))).await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &question(TRIANGLE)).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(call_names(&v), vec!["determine_body_mass_index"], "{v}");
    assert_eq!(fake.request_count(), 1);
    assert_eq!(fake.guesses().len(), 1);
}

#[tokio::test]
async fn a_guess_the_upstream_fails_or_leaves_empty_keeps_the_call() {
    // A failed decision request does not fail the client's request: the call goes through.
    let failing = FakeGuess {
        fail: true,
        ..FakeGuess::default()
    };
    for g in [failing, FakeGuess::default()] {
        let fake = FakeServer::start(fake(g)).await;
        let base = proxy(&fake, |_| {}).await;
        let (status, v) = post(&base, &question(TRIANGLE)).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(call_names(&v), vec!["determine_body_mass_index"], "{v}");
        assert_eq!(fake.request_count(), 1);
        assert!(!fake.guesses().is_empty());
    }
}

#[tokio::test]
async fn the_guess_is_bounded_in_time_and_tokens() {
    // An upstream slow to guess: the call comes back after `guess_timeout`, not the guess's 5 s,
    // and the transcript says the call went out unchecked.
    let slow = FakeGuess {
        reply: Some("triangle_area".into()),
        delay: Duration::from_secs(5),
        ..FakeGuess::default()
    };
    let fake = FakeServer::start(fake(slow)).await;
    let dir = tempfile::tempdir().unwrap();
    let base = proxy(&fake, |c| {
        c.grammar = GrammarMode::On;
        c.guess_timeout = Some(Duration::from_millis(300));
        c.session_dir = Some(dir.path().to_path_buf());
    })
    .await;
    let started = Instant::now();
    let (status, v) = post(&base, &question(TRIANGLE)).await;
    let took = started.elapsed();
    assert_eq!(status, 200, "{v}");
    assert_eq!(call_names(&v), vec!["determine_body_mass_index"], "{v}");
    assert!(took < Duration::from_secs(4), "took {took:?}");
    let judged = &the_transcript(dir.path())["decisions"];
    assert_eq!(
        judged,
        &json!([{"rule": "guess", "tools": ["determine_body_mass_index"], "guess": null,
            "declined": false, "timed_out": true,
            "why": "the guess did not answer within its 0.3 s (--guess-timeout): the call is kept unchecked"}]),
    );
    // At most 16 tokens, temperature 0, and one snake_case name under the grammar.
    let g = &fake.guesses()[0];
    assert!(g["max_tokens"].as_u64().is_some_and(|n| n <= 16), "{g}");
    assert_eq!(g["temperature"], json!(0.0));
    let grammar = g["grammar"].as_str().unwrap_or_default();
    assert!(grammar.starts_with("root ::= [a-z] [a-z0-9_]{2,"), "{g}");
}

#[tokio::test]
async fn nothing_is_guessed_after_results_or_under_required() {
    let fake = FakeServer::start(FakeConfig {
        guess: guess("triangle_area"),
        ..FakeConfig::turns([WRONG_CALL, WRONG_CALL])
    })
    .await;
    let base = proxy(&fake, |_| {}).await;
    // After results the call is the conversation's doing.
    let after = json!({"model": "m", "tools": bmi(), "messages": [
        {"role": "user", "content": TRIANGLE},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_a", "type": "function",
            "function": {"name": "determine_body_mass_index", "arguments": "{\"weight\": 1, \"height\": 1}"}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "1.0"}
    ]});
    let (status, v) = post(&base, &after).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(call_names(&v), vec!["determine_body_mass_index"], "{v}");
    // Under `required` the client wants a call.
    let mut required = question(TRIANGLE);
    required["tool_choice"] = json!("required");
    let (status, v) = post(&base, &required).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(call_names(&v), vec!["determine_body_mass_index"], "{v}");
    assert!(fake.guesses().is_empty());
}

#[tokio::test]
async fn the_transcript_says_why_each_call_was_kept_or_declined() {
    // Kept by the guess: before, only a declined turn left a trace (its correction).
    let question_about_bmi = "What is the body mass index of someone of 10 kilograms and 5 m?";
    for (name, q, declined, why) in [
        (
            "body_mass_index",
            question_about_bmi,
            false,
            "the model's own function for the question, body_mass_index, is about determine_body_mass_index",
        ),
        (
            "triangle_area",
            TRIANGLE,
            true,
            "declined: asked without the tools, the model would call triangle_area, which shares no word with determine_body_mass_index",
        ),
        // A loop on one word (BFCL multiple_19's kind) is no guess: the call is kept.
        (
            "triangle_triangle_triangle_triangle_trian",
            TRIANGLE,
            false,
            "the model's own function, triangle_triangle_triangle_triangle_trian, repeats the word triangle: no guess, the call is kept",
        ),
    ] {
        let upstream = FakeServer::start(fake(guess(name))).await;
        let dir = tempfile::tempdir().unwrap();
        let base = proxy(&upstream, |c| {
            c.session_dir = Some(dir.path().to_path_buf())
        })
        .await;
        let (status, v) = post(&base, &question(q)).await;
        assert_eq!(status, 200, "{v}");
        // The guess is sent beside the turn: when it answers first and declines the one tool,
        // the turn is dropped and the judgement says so (`before_call`, tested on its own
        // below); which of the two answers first is up to the fake's scheduling.
        let mut decisions = the_transcript(dir.path())["decisions"].clone();
        if let Some(d) = decisions.get_mut(0).and_then(Value::as_object_mut) {
            d.remove("before_call");
        }
        assert_eq!(
            decisions,
            json!([{"rule": "guess", "tools": ["determine_body_mass_index"], "guess": name,
                "declined": declined, "why": why}]),
            "{name}"
        );
    }
    // Declined by the grounding rule: no guess asked, the judgement recorded all the same.
    let fake = FakeServer::start(fake(guess("triangle_area"))).await;
    let dir = tempfile::tempdir().unwrap();
    let base = proxy(&fake, |c| c.session_dir = Some(dir.path().to_path_buf())).await;
    let (status, v) = post(&base, &question("How tall is the Eiffel tower?")).await;
    assert_eq!(status, 200, "{v}");
    let judged = &the_transcript(dir.path())["decisions"];
    assert_eq!(judged[0]["rule"], "grounding", "{judged}");
    assert_eq!(judged[0]["declined"], true, "{judged}");
    // The guess was sent beside the turn (it names nothing the question says, so it declined
    // nothing ahead), and it judged nothing: the grounding rule's is the one judgement.
    assert_eq!(judged.as_array().map(Vec::len), Some(1), "{judged}");
}

#[tokio::test]
async fn a_guess_that_answers_first_and_declines_every_tool_drops_the_turn() {
    // The turn is slow to begin; the guess answers at once and no tool shares a word with it.
    let upstream = FakeServer::start(FakeConfig {
        first_byte_delay: Duration::from_millis(1500),
        ..fake(guess("triangle_area"))
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let base = proxy(&upstream, |c| {
        c.session_dir = Some(dir.path().to_path_buf())
    })
    .await;
    let (status, v) = post(&base, &question(TRIANGLE)).await;
    assert_eq!(status, 200, "{v}");
    assert!(call_names(&v).is_empty(), "{v}");
    let t = the_transcript(dir.path());
    assert_eq!(
        t["decisions"],
        json!([{"rule": "guess", "tools": ["determine_body_mass_index"], "guess": "triangle_area",
            "declined": true, "before_call": true,
            "why": "declined: asked without the tools, the model would call triangle_area, which shares no word with determine_body_mass_index"}])
    );
    // The dropped turn was never read: the one turn kept is the answer-only turn's.
    let turns = t["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1, "{t}");
    assert!(
        !turns[0].to_string().contains("determine_body_mass_index("),
        "{t}"
    );
    assert_eq!(upstream.guesses().len(), 1);
}

#[tokio::test]
async fn a_guess_about_a_declared_tool_lets_the_turn_go_on() {
    // The guess answers first, but it is about the tool: the turn is not dropped and its call
    // is judged by the guess already had (no second guess).
    let upstream = FakeServer::start(FakeConfig {
        first_byte_delay: Duration::from_millis(800),
        ..fake(guess("body_mass_index"))
    })
    .await;
    let base = proxy(&upstream, |_| {}).await;
    let q = "What is the body mass index of someone of 10 kilograms and 5 m?";
    let (status, v) = post(&base, &question(q)).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(call_names(&v), vec!["determine_body_mass_index"], "{v}");
    assert_eq!(upstream.guesses().len(), 1);
}

#[tokio::test]
async fn without_a_bound_of_its_own_the_guess_has_the_requests_time() {
    // A slow guess within the request's limit is waited for and checks the call (declined).
    let late = |delay_ms: u64| FakeGuess {
        reply: Some("triangle_area".into()),
        delay: Duration::from_millis(delay_ms),
        ..FakeGuess::default()
    };
    let upstream = FakeServer::start(fake(late(1500))).await;
    let base = proxy(&upstream, |c| c.timeout = Duration::from_secs(20)).await;
    let (status, v) = post(&base, &question(TRIANGLE)).await;
    assert_eq!(status, 200, "{v}");
    assert!(call_names(&v).is_empty(), "{v}");
    // A guess that outlasts the request's limit ends it as any slow upstream does (504), and
    // the transcript of the whole answer is written all the same, the guess unfinished in it.
    let upstream = FakeServer::start(fake(late(5000))).await;
    let dir = tempfile::tempdir().unwrap();
    let base = proxy(&upstream, |c| {
        c.timeout = Duration::from_secs(1);
        c.session_dir = Some(dir.path().to_path_buf());
    })
    .await;
    let (status, v) = post(&base, &question(TRIANGLE)).await;
    assert_eq!(status, 504, "{v}");
    let t = the_transcript(dir.path());
    assert!(
        t["error"].as_str().is_some_and(|e| e.contains("1 s")),
        "{t}"
    );
    assert_eq!(
        t["decisions"],
        json!([{"rule": "guess", "tools": ["determine_body_mass_index"], "guess": null,
            "declined": false,
            "why": "the request ended (its --timeout ran out, or the client left) before the guess answered"}])
    );
}
