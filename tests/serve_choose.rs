//! Serve's re-ask for the tool the question's words name (`src/serve/choose.rs`), against a
//! fake upstream: a turn right after the question whose one call is of a tool that shares fewer
//! of the question's words than another tool is asked once more under a grammar of that other
//! tool alone, and the client gets the new call; a call of the tool the words name, a turn
//! without a grammar, and a re-ask that gives no call of the better tool leave the first call.
//! A text answer is re-asked for a leading tool whose name says a word of the question, and
//! the call it gives is judged as any first call (one of values nobody gave is declined).
//! The re-ask is one more request of the answer: counted, its usage summed, and its turn in the
//! transcript whether it was used or not.

mod common;

use common::fake_server::{FakeConfig, FakeGuess, FakeServer};
use common::serve::{post, proxy, the_transcript};
use serde_json::{Value, json};
use tagloop::llm::GrammarMode;

/// BFCL multiple_7's two tools (as BFCL's runner sends them, names with `_` for `.`).
fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "wildlife_population_assess_growth",
          "description": "Assesses the population growth of a specific species in a specified location over a period.",
          "parameters": {"type": "object", "properties": {
            "species": {"type": "string", "description": "The species for which the growth is to be calculated."},
            "location": {"type": "string", "description": "The area where the species is present."},
            "duration": {"type": "integer", "description": "The time period for which the population growth should be calculated in years."}},
            "required": ["species", "location", "duration"]}}},
        {"type": "function", "function": {"name": "ecological_impact_analyze",
          "description": "Analyzes the impact of a species on a particular ecosystem.",
          "parameters": {"type": "object", "properties": {
            "species": {"type": "string", "description": "The species whose impact is to be calculated."},
            "ecosystem": {"type": "string", "description": "The ecosystem being affected."},
            "location": {"type": "string", "description": "The area where the impact is analyzed."},
            "timeframe": {"type": "integer", "description": "The time period for which the impact analysis should be carried out in years."}},
            "required": ["species", "ecosystem", "location"]}}}
    ])
}

const QUESTION: &str = "How to assess the population growth in deer and their impact on woodland in Washington state over the past decade?";

/// The 0.5B's turn on it: the neighbour tool (its values the question's).
const WRONG: &str = "<thought>I should analyze the impact.</thought>\n<action>ecological_impact_analyze(species=\"deer\", ecosystem=\"woodland\", location=\"Washington\", timeframe=10)</action>";
const RIGHT: &str = "<thought>I assess the growth.</thought>\n<action>wildlife_population_assess_growth(species=\"deer\", location=\"Washington state\", duration=10)</action>";

fn question() -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": QUESTION}], "tools": tools()})
}

fn calls(v: &Value) -> Vec<(String, Value)> {
    v["choices"][0]["message"]["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let args = c["function"]["arguments"].as_str().unwrap_or("null");
            (
                c["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                serde_json::from_str(args).unwrap_or(Value::Null),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_call_of_the_tool_the_question_names_less_is_asked_again_for_the_other() {
    let fake = FakeServer::start(FakeConfig::turns([WRONG, RIGHT])).await;
    let base = proxy(&fake, |c| c.grammar = GrammarMode::On).await;
    let (status, v) = post(&base, &question()).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        calls(&v),
        vec![(
            "wildlife_population_assess_growth".to_string(),
            json!({"species": "deer", "location": "Washington state", "duration": 10})
        )],
        "{v}"
    );
    // The same prompt, asked again under a grammar of one call of the better tool only.
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body["messages"], reqs[1].body["messages"]);
    let first = reqs[0].body["grammar"].as_str().unwrap_or_default();
    assert!(first.contains("\"ecological_impact_analyze(\""), "{first}");
    let again = reqs[1].body["grammar"].as_str().unwrap_or_default();
    assert!(
        again.contains("\"wildlife_population_assess_growth(\""),
        "{again}"
    );
    assert!(!again.contains("\"ecological_impact_analyze(\""), "{again}");
    assert!(!again.contains("<final_answer>"), "{again}");
}

#[tokio::test]
async fn a_call_of_the_tool_the_question_names_most_is_not_asked_again() {
    let fake = FakeServer::start(FakeConfig::turns([RIGHT, WRONG])).await;
    let base = proxy(&fake, |c| c.grammar = GrammarMode::On).await;
    let (status, v) = post(&base, &question()).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(calls(&v)[0].0, "wildlife_population_assess_growth", "{v}");
    assert_eq!(fake.request_count(), 1);
}

#[tokio::test]
async fn without_a_grammar_or_without_a_usable_re_ask_the_first_call_stands() {
    // No grammar would hold the model to the better tool: nothing is asked again.
    let fake = FakeServer::start(FakeConfig::turns([WRONG, RIGHT])).await;
    let base = proxy(&fake, |c| c.grammar = GrammarMode::Off).await;
    let (status, v) = post(&base, &question()).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(calls(&v)[0].0, "ecological_impact_analyze", "{v}");
    assert_eq!(fake.request_count(), 1);
    // A re-ask that answers in text instead (an upstream that ignored the grammar) changes
    // nothing: the first call goes out, and nothing more is asked.
    let fake = FakeServer::start(FakeConfig::turns([
        WRONG,
        "<thought>Hm.</thought>\n<final_answer>Deer grow.</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |c| c.grammar = GrammarMode::On).await;
    let (status, v) = post(&base, &question()).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(calls(&v)[0].0, "ecological_impact_analyze", "{v}");
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test]
async fn after_results_or_under_a_named_tool_nothing_is_asked_again() {
    let fake = FakeServer::start(FakeConfig::turns([WRONG, WRONG, RIGHT])).await;
    let base = proxy(&fake, |c| c.grammar = GrammarMode::On).await;
    let mut after = question();
    after["messages"] = json!([
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_a", "type": "function",
            "function": {"name": "wildlife_population_assess_growth",
              "arguments": "{\"species\": \"deer\", \"location\": \"WA\", \"duration\": 10}"}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "growth: 3%"}
    ]);
    let (status, v) = post(&base, &after).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(calls(&v)[0].0, "ecological_impact_analyze", "{v}");
    let mut named = question();
    named["tool_choice"] =
        json!({"type": "function", "function": {"name": "ecological_impact_analyze"}});
    let (status, v) = post(&base, &named).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(calls(&v)[0].0, "ecological_impact_analyze", "{v}");
    assert_eq!(fake.request_count(), 2);
}

/// BFCL multiple_2's three tools.
fn countries() -> Value {
    let tool = |name: &str, what: &str| {
        json!({"type": "function", "function": {"name": name,
          "description": format!("Fetch the {what} of a specified country."),
          "parameters": {"type": "object", "properties": {
            "country": {"type": "string", "description": "The country."}},
            "required": ["country"]}}})
    };
    json!([
        tool("country_info_largest_city", "largest city"),
        tool("country_info_capital", "capital city"),
        tool("country_info_population", "current population")
    ])
}

const NO_CAPITAL: &str = "<thought>None of my tools is about this, so I answer directly.</thought>\n<final_answer>Brazil has no capital.</final_answer>";

#[tokio::test]
async fn a_text_answer_is_asked_again_for_the_tool_whose_name_the_question_says() {
    let capital =
        "<thought>I call it.</thought>\n<action>country_info_capital(country=\"Brazil\")</action>";
    let fake = FakeServer::start(FakeConfig::turns([NO_CAPITAL, capital])).await;
    let base = proxy(&fake, |c| c.grammar = GrammarMode::On).await;
    let body = json!({"model": "m", "tools": countries(),
        "messages": [{"role": "user", "content": "What is the capital of Brazil?"}]});
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        calls(&v),
        vec![(
            "country_info_capital".to_string(),
            json!({"country": "Brazil"})
        )],
        "{v}"
    );
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    let again = reqs[1].body["grammar"].as_str().unwrap_or_default();
    assert!(again.contains("\"country_info_capital(\""), "{again}");
    assert!(!again.contains("\"country_info_population(\""), "{again}");
}

#[tokio::test]
async fn the_call_a_text_answer_was_re_asked_for_is_judged_like_any_first_call() {
    // The re-ask's call holds a value nobody gave: declined, and the answer-only turn answers.
    let invented = "<thought>I call it.</thought>\n<action>country_info_capital(country=\"Atlantis\")</action>";
    let fake = FakeServer::start(FakeConfig::turns([
        NO_CAPITAL,
        invented,
        "<thought>I answer.</thought>\n<final_answer>Brasilia.</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |c| c.grammar = GrammarMode::On).await;
    let body = json!({"model": "m", "tools": countries(),
        "messages": [{"role": "user", "content": "What is the capital of Brazil?"}]});
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    assert!(calls(&v).is_empty(), "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "Brasilia.");
    assert_eq!(fake.request_count(), 3);
    // A question no tool's name says keeps the model's answer, with no more requests.
    let fake = FakeServer::start(FakeConfig::turns([NO_CAPITAL])).await;
    let base = proxy(&fake, |c| c.grammar = GrammarMode::On).await;
    let body = json!({"model": "m", "tools": countries(),
        "messages": [{"role": "user", "content": "Who wrote Hamlet?"}]});
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "Brazil has no capital."
    );
    assert_eq!(fake.request_count(), 1);
}

#[tokio::test]
async fn a_re_ask_is_counted_summed_and_recorded_used_or_not() {
    const ANSWERED: &str = "<thought>Hm.</thought>\n<final_answer>Deer grow.</final_answer>";
    for (second, turns, out) in [
        // Used: the first turn (with why it was re-asked), then the re-ask's, whose call goes out.
        (
            RIGHT,
            vec![(WRONG, true), (RIGHT, false)],
            "wildlife_population_assess_growth",
        ),
        // Not used (a text answer under the one-call grammar an upstream ignored): still one
        // turn the model wrote, recorded before the turn whose call stands.
        (
            ANSWERED,
            vec![(ANSWERED, true), (WRONG, false)],
            "ecological_impact_analyze",
        ),
    ] {
        // A guess the upstream fails: made (counted), no usage (the fake's turns alone have it).
        let fake = FakeServer::start(FakeConfig {
            guess: FakeGuess {
                fail: true,
                ..FakeGuess::default()
            },
            ..FakeConfig::turns([WRONG, second])
        })
        .await;
        let dir = tempfile::tempdir().unwrap();
        let base = proxy(&fake, |c| {
            c.grammar = GrammarMode::On;
            c.session_dir = Some(dir.path().to_path_buf());
        })
        .await;
        let (status, v) = post(&base, &question()).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(calls(&v)[0].0, out, "{v}");
        let t = the_transcript(dir.path());
        // Each turn as the fake wrote it, up to the re-ask's stop (`</action>`, `</final_answer>`).
        let recorded: Vec<(&str, bool)> = t["turns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["turn"].as_str().unwrap(), !e["correction"].is_null()))
            .collect();
        assert_eq!(recorded.len(), turns.len(), "{t}");
        for ((got, noted), (wrote, note)) in recorded.iter().zip(&turns) {
            assert!(got.len() > 30 && wrote.starts_with(got), "{got} / {wrote}");
            assert_eq!(noted, note, "{t}");
        }
        if second == ANSWERED {
            let note = t["turns"][0]["correction"].as_str().unwrap();
            assert!(
                note.contains("re-asked for wildlife_population_assess_growth"),
                "{note}"
            );
            assert!(note.contains("a text answer"), "{note}");
        }
        // The turn, the re-ask and the guess: three requests made, all counted; the usage
        // sums both turns' prompts (the same messages; the fake counts 4 bytes a token; the
        // failed guess has none).
        let reqs = fake.requests();
        assert_eq!(reqs.len(), 2);
        assert_eq!(fake.guesses().len(), 1);
        assert_eq!(t["requests"], 3, "{t}");
        let prompt = reqs[0].body["messages"].to_string().len() as u64 / 4;
        assert_eq!(v["usage"]["prompt_tokens"], 2 * prompt, "{v}");
    }
}
