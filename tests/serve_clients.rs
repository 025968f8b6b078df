//! Real clients against `tagloop serve`: the official `openai` Python SDK and LangChain's
//! `ChatOpenAI.bind_tools`; on the Anthropic face (`/v1/messages`), the official `anthropic` SDK
//! and LangChain's `ChatAnthropic.bind_tools` (built on it); unmodified, from the pinned venv that `scripts/setup-pyclients.sh`
//! installs (run by `scripts/test.sh`). The server runs as the real binary on a free port, in
//! front of the fake upstream, which speaks only tagloop's text protocol: every `tool_calls` a
//! client gets was read from a `<action>` turn, and every tool result it sends back reaches the
//! model as part of the prompt.
//!
//! What the Python scripts check is in `tests/py/`; here, what the upstream saw. A missing or
//! stale venv fails these tests (with the command to run), it never skips them.

mod common;

use std::time::Duration;

use common::fake_server::{FakeConfig, FakeServer};
use common::py::{ScriptRun, run_script};
use common::serve_proc::Serve;

/// The tool result the scripts send back (`tests/py/`): once the prompt holds it, the model answers.
const RESULT: &str = "sunny, 21 C";

/// A model that uses the weather tool: it calls get_weather(city="Paris") until the tool's
/// result is in its prompt, then answers from it; asked to answer "without tools", it does.
/// Replies follow the prompt's content, not the order of requests, so the scripts' requests
/// (and any the proxy makes) can come in any order.
fn weather_model() -> FakeConfig {
    FakeConfig {
        default_reply: "<thought>I need the weather in Paris.</thought>\n\
                        <action>get_weather(city=\"Paris\")</action>"
            .into(),
        by_content: vec![
            (
                RESULT.into(),
                "<thought>The tool answered.</thought>\n\
                 <final_answer>It is sunny and 21 C in Paris.</final_answer>"
                    .into(),
            ),
            (
                "without tools".into(),
                "<thought>No tool is wanted here.</thought>\n\
                 <final_answer>Yes: answered without tools, Paris is in France.</final_answer>"
                    .into(),
            ),
        ],
        ..FakeConfig::default()
    }
}

/// Run a script against `tagloop serve` in front of the weather model; fail with everything
/// the script, the server and the upstream said when a check did not hold, or when the
/// upstream was not spoken to in the text protocol.
fn run_against_serve(script: &str) -> ScriptRun {
    // First, so that a missing venv is what the failure says.
    common::py::python();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let upstream = rt.block_on(FakeServer::start(weather_model()));
    let serve = Serve::start(&upstream.base_url, &["--model", "fake-model"]);
    // Bounds a hang, not a speed: each request is answered at once by the fake.
    let run = run_script(
        script,
        &serve.base_url,
        "fake-model",
        Duration::from_secs(120),
    );
    assert!(
        run.ok,
        "{script} failed:\n--- stdout\n{}\n--- stderr\n{}\n--- tagloop serve\n{}\n--- upstream got\n{:#?}",
        run.stdout,
        run.stderr,
        serve.log(),
        upstream
            .requests()
            .iter()
            .map(|r| &r.body)
            .collect::<Vec<_>>()
    );
    assert_text_protocol_upstream(&upstream);
    run
}

/// The upstream was spoken to in the text protocol: never sent `tools` (the proxy turned them
/// into its prompt), and the tool result the client sent came back to it inside a prompt.
fn assert_text_protocol_upstream(upstream: &FakeServer) {
    let requests = upstream.requests();
    assert!(!requests.is_empty(), "the upstream got no request");
    for r in &requests {
        assert!(
            r.body.get("tools").is_none() && r.body.get("tool_choice").is_none(),
            "the upstream got OpenAI tools instead of the text protocol: {}",
            r.body
        );
    }
    assert!(
        requests.iter().any(|r| r.body.to_string().contains(RESULT)),
        "the tool result never reached the upstream's prompt"
    );
}

#[test]
fn the_openai_sdk_gets_tool_calls_whole_and_streamed_under_each_tool_choice() {
    let run = run_against_serve("openai_tools.py");
    assert!(run.stdout.contains("openai_tools: ok"), "{}", run.stdout);
}

#[test]
fn langchain_runs_a_two_step_tool_task_through_serve() {
    let run = run_against_serve("langchain_tools.py");
    assert!(run.stdout.contains("langchain_tools: ok"), "{}", run.stdout);
}

#[test]
fn the_anthropic_sdk_gets_tool_use_whole_and_streamed_and_sends_tool_results() {
    let run = run_against_serve("anthropic_tools.py");
    assert!(run.stdout.contains("anthropic_tools: ok"), "{}", run.stdout);
}

#[test]
fn an_agent_loop_on_the_anthropic_sdk_runs_a_two_step_tool_task() {
    let run = run_against_serve("langchain_anthropic_tools.py");
    assert!(
        run.stdout.contains("langchain_anthropic_tools: ok"),
        "{}",
        run.stdout
    );
}

#[test]
fn langchain_embeddings_and_its_chat_model_share_serves_one_base_url() {
    // The embeddings pass through (`src/serve/passthrough/`), the chat's tools are answered.
    let run = run_against_serve("langchain_embeddings.py");
    assert!(
        run.stdout.contains("langchain_embeddings: ok"),
        "{}",
        run.stdout
    );
}
