//! The curated library API (issue 33, item 2): a program builds and runs an agent with the names
//! at the crate root alone — no `tagloop::agent::…`, `tagloop::llm::…` or `tagloop::tools::…`.
//! Every root name is imported here, so one that goes missing or moves breaks this file first.

use std::sync::Arc;

use serde_json::json;
use tagloop::{
    Agent, AgentBuilder, AgentConfig, AgentError, LlmError, McpError, McpSource, Model,
    OpenAiConfig, OpenAiModel, Outcome, Registry, Role, RoleError, Script, ScriptedModel, Status,
    Tool, ToolError, ToolkitOptions, Workspace, WorkspaceError, tool_fn, toolkit,
};
#[cfg(feature = "serve")]
use tagloop::{ServeConfig, ServeError, router};

/// The arguments of the `distance` tool.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Between {
    from: String,
    to: String,
}

/// The structured answer the role asks for.
#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
struct Trip {
    total_km: u32,
}

fn scripted(turns: &[&str]) -> Arc<dyn Model> {
    let text: String = turns
        .iter()
        .map(|t| format!("=== turn ===\n{t}\n"))
        .collect();
    let script = Script::parse(&text).expect("the test's script parses");
    Arc::new(ScriptedModel::new(Arc::new(script)))
}

fn distance_tools() -> Registry {
    let mut tools = Registry::new();
    tools.add(Arc::new(tool_fn(
        "distance",
        "Road distance in km between two cities.",
        |b: Between| async move {
            match (b.from.as_str(), b.to.as_str()) {
                ("Paris", "Lyon") => Ok("465 km".to_owned()),
                _ => Err(ToolError::Failed(format!(
                    "no data for {} to {}",
                    b.from, b.to
                ))),
            }
        },
    )));
    tools
}

#[tokio::test]
async fn an_agent_built_from_root_names_runs_a_tool_and_answers_typed() {
    let model = scripted(&[
        r#"<thought>Ask the tool.</thought>
<action>distance(from="Paris", to="Lyon")</action>"#,
        r#"<thought>465 it is.</thought>
<final_answer>{"total_km": 465}</final_answer>"#,
    ]);
    let role: Role = Role::for_type::<Trip>("trip planner", "Add up the legs.").unwrap();
    let builder: AgentBuilder = Agent::builder(model)
        .tools(distance_tools())
        .role(role)
        .config(AgentConfig::default());
    let agent: Agent = builder.max_steps(4).build().unwrap();

    let outcome: Outcome<Trip> = agent.run_as::<Trip>("Paris to Lyon?").await.unwrap();

    assert_eq!(outcome.status, Status::Ok, "{:?}", outcome.error);
    assert_eq!(outcome.final_answer, Some(Trip { total_km: 465 }));
    // The tool really ran: its result went back to the model as the observation.
    assert!(
        outcome
            .messages
            .iter()
            .any(|m| m.content.contains("465 km")),
        "no observation with the tool's result in {:?}",
        outcome.messages
    );
}

#[tokio::test]
async fn the_root_errors_are_the_ones_the_root_names_return() {
    // A script with an unknown turn flag: LlmError.
    let bad: Result<Script, LlmError> = Script::parse("=== turn sideways ===\nhi\n");
    assert!(
        matches!(bad, Err(LlmError::ScriptFormat { line: 1, .. })),
        "{bad:?}"
    );

    // An output schema that is not a JSON Schema: RoleError.
    let role: Result<Role, RoleError> =
        Role::new("r", "").with_output_schema(json!({"type": "no such type"}));
    assert!(matches!(role, Err(RoleError::Schema { .. })));

    // A final answer that does not fit the requested type (a role without a schema accepts it as
    // text): AgentError::Decode, with the answer kept.
    let model = scripted(&[r#"<thought>Done.</thought>
<final_answer>{"total_km": "far"}</final_answer>"#]);
    let agent = Agent::builder(model).build().unwrap();
    match agent.run_as::<Trip>("How far?").await {
        Err(AgentError::Decode { outcome, .. }) => {
            assert_eq!(outcome.final_answer, Some(json!(r#"{"total_km": "far"}"#)));
        }
        other => panic!(
            "expected AgentError::Decode, got {:?}",
            other.map(|o| o.status)
        ),
    }

    // A base URL that is not http(s): LlmError from OpenAiModel::new, before any request.
    let model = OpenAiModel::new(OpenAiConfig::new("ftp://127.0.0.1/v1", "m"));
    assert!(matches!(model, Err(LlmError::Config(_))));

    // A workspace that does not exist: WorkspaceError.
    let dir = tempfile::tempdir().unwrap();
    let missing: Result<Workspace, WorkspaceError> = Workspace::new(dir.path().join("nope"));
    assert!(missing.is_err(), "{missing:?}");

    // An MCP server that cannot start: McpError.
    let mcp: Result<McpSource, McpError> = McpSource::start(
        "/nonexistent/tagloop-mcp-server",
        std::time::Duration::from_secs(5),
    )
    .await;
    assert!(mcp.is_err());
}

#[tokio::test]
async fn the_root_toolkit_reads_its_workspace_in_a_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "the answer is 42\n").unwrap();
    let ws = Arc::new(Workspace::new(dir.path()).unwrap());
    let tools: Registry = toolkit(ws, ToolkitOptions::default());
    let read: &Arc<dyn Tool> = tools.get("read_file").expect("the toolkit has read_file");
    assert_eq!(read.name(), "read_file");
    // Gates shut by default: no shell, no writes.
    assert!(tools.get("run_command").is_none() && tools.get("write_file").is_none());

    let model = scripted(&[
        r#"<thought>Read the notes.</thought>
<action>read_file(path="notes.txt")</action>"#,
        "<thought>Found it.</thought>\n<final_answer>42</final_answer>",
    ]);
    let agent = Agent::builder(model).tools(tools).build().unwrap();
    let outcome = agent.run("What is the answer?").await;
    assert_eq!(outcome.status, Status::Ok, "{:?}", outcome.error);
    assert!(
        outcome
            .messages
            .iter()
            .any(|m| m.content.contains("the answer is 42")),
        "the file's text never reached the model: {:?}",
        outcome.messages
    );
}

#[cfg(feature = "serve")]
#[test]
fn the_root_router_takes_a_serve_config() {
    assert!(router(ServeConfig::new("http://127.0.0.1:9/v1")).is_ok());
    let bad: Result<_, ServeError> = router(ServeConfig::new("ftp://127.0.0.1/v1"));
    assert!(matches!(bad, Err(ServeError::Config(_))));
}
