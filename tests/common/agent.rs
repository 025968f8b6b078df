//! An agent over a few test tools (`echo`, `add`, `fail`, `slow`), driven by the scripted model,
//! and the run options and event sinks its tests use; the pieces the `agent_*` tests share
//! besides: a run's observations over any tools, a fixed model turn, the `population` tool.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tagloop::agent::{Agent, AgentConfig, Event, EventSink, RunOptions, Status};
use tagloop::llm::ScriptedModel;
use tagloop::llm::{Finish, Model, Role as MsgRole, TurnResult};
use tagloop::tools::{Registry, ToolError, tool_fn};

/// The scripted model of these turns.
pub fn script(turns: &[&str]) -> Arc<ScriptedModel> {
    super::script::model(turns)
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// The text to echo.
    text: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    a: i64,
    b: i64,
}

/// The arguments of a tool that takes a path.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct PathArgs {
    /// The file.
    pub path: String,
}

/// The arguments of a tool that takes a city.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct CityArgs {
    pub city: String,
}

/// A registry of one tool, `population` ("Population of a city."), answering `reply(city)`.
pub fn population(reply: fn(&str) -> String) -> Registry {
    let mut r = Registry::new();
    r.add(Arc::new(tool_fn(
        "population",
        "Population of a city.",
        move |l: CityArgs| async move { Ok(reply(&l.city)) },
    )));
    r
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct SearchArgs {
    /// What to look for.
    pattern: String,
}

/// `read` ("A file's one line": `PATH: 7`) and `search` (finds nothing).
pub fn read_and_search() -> Registry {
    let mut r = Registry::new();
    r.add(Arc::new(tool_fn(
        "read",
        "A file's one line.",
        |a: PathArgs| async move { Ok(format!("{}: 7", a.path)) },
    )));
    r.add(Arc::new(tool_fn(
        "search",
        "Finds nothing.",
        |a: SearchArgs| async move { Ok(format!("no matches for /{}/", a.pattern)) },
    )));
    r
}

/// The arguments of a tool that takes none.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Nothing {}

/// `add` alone: a tool that takes only numbers.
pub fn adder() -> Registry {
    let mut r = Registry::new();
    r.add(Arc::new(tool_fn(
        "add",
        "Add two integers.",
        |a: AddArgs| async move { Ok((a.a + a.b).to_string()) },
    )));
    r
}

/// `echo`, `add`, `fail` (always fails) and `slow` (takes 30 s).
pub fn tools() -> Registry {
    let mut r = Registry::new();
    r.add(Arc::new(tool_fn(
        "echo",
        "Echo the text back.",
        |a: EchoArgs| async move { Ok(format!("echo: {}", a.text)) },
    )));
    r.extend(adder());
    r.add(Arc::new(tool_fn(
        "fail",
        "Always fails.",
        |_: Nothing| async move { Err::<String, _>(ToolError::Failed("disk on fire".into())) },
    )));
    r.add(Arc::new(tool_fn(
        "slow",
        "Takes forever.",
        |_: Nothing| async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok("late".to_string())
        },
    )));
    r
}

/// An agent over [`tools`] with a 200 ms tool timeout, its config changed by `f`.
pub fn agent(model: Arc<dyn Model>, f: impl FnOnce(&mut AgentConfig)) -> Agent {
    let mut config = AgentConfig {
        tool_timeout: Duration::from_millis(200),
        ..AgentConfig::default()
    };
    f(&mut config);
    Agent::builder(model)
        .tools(tools())
        .config(config)
        .build()
        .expect("agent builds")
}

/// The user messages after the system prompt and the task: the observations.
pub fn observations(messages: &[tagloop::llm::Message]) -> Vec<String> {
    messages
        .iter()
        .skip(2)
        .filter(|m| m.role == MsgRole::User)
        .map(|m| m.content.clone())
        .collect()
}

/// Run options that send the events to `sink`.
pub fn with_events(sink: EventSink) -> RunOptions {
    RunOptions {
        events: Some(sink),
        ..Default::default()
    }
}

/// Run options that write the transcript to `dir/s.jsonl`.
pub fn with_transcript(dir: &std::path::Path) -> RunOptions {
    RunOptions {
        transcript: Some(tagloop::session::Transcript::create(dir, "s").unwrap()),
        ..Default::default()
    }
}

/// A sink that keeps every event, and the events kept.
pub fn collect_events() -> (EventSink, Arc<Mutex<Vec<Event>>>) {
    let store = Arc::new(Mutex::new(Vec::new()));
    let s = store.clone();
    (
        Arc::new(move |e: &Event| s.lock().unwrap().push(e.clone())),
        store,
    )
}

/// The status and the observations of a run of `task` over `tools`, the scripted model writing
/// `turns`, in at most `max_steps` steps.
pub async fn observed_run(
    tools: Registry,
    task: &str,
    turns: &[&str],
    max_steps: u32,
) -> (Status, Vec<String>) {
    let agent = Agent::builder(script(turns))
        .tools(tools)
        .config(AgentConfig {
            max_steps,
            ..AgentConfig::default()
        })
        .build()
        .expect("agent builds");
    let o = agent.run(task).await;
    (o.status, observations(&o.messages))
}

/// A model's turn of `text` that ended as `finish`, costing nothing, taking no time.
pub fn turn_result(text: impl Into<String>, finish: Finish) -> TurnResult {
    TurnResult::new(text, finish)
}
