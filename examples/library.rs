//! The library API in one file: a typed role, a tool made from a closure, a model, and a run
//! whose final answer comes back as a Rust value.
//!
//! Offline (replays a recorded episode):   cargo run --example library
//! Against a server:  TAGLOOP_MODEL=qwen2.5:7b-instruct OPENAI_BASE_URL=http://127.0.0.1:11434/v1 cargo run --example library

use std::sync::Arc;

use tagloop::{
    Agent, Model, OpenAiConfig, OpenAiModel, Registry, Role, Script, ScriptedModel, ToolError,
    tool_fn,
};

/// What the agent must answer with: validated against the schema derived from this type.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct Trip {
    /// Total distance in kilometres.
    total_km: f64,
    /// The legs, in order.
    legs: Vec<String>,
}

/// The arguments of the `distance` tool.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Between {
    /// Where the leg starts.
    from: String,
    /// Where it ends.
    to: String,
}

/// The episode the offline model replays.
const EPISODE: &str = r#"=== turn ===
<thought>I need the distance of each leg. First Paris to Lyon.</thought>
<action>distance(from="Paris", to="Lyon")</action>
=== turn ===
<thought>Now Lyon to Marseille.</thought>
<action>distance(from="Lyon", to="Marseille")</action>
=== turn ===
<thought>465 + 315 = 780 km.</thought>
<final_answer>{"total_km": 780, "legs": ["Paris-Lyon", "Lyon-Marseille"]}</final_answer>
"#;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model: Arc<dyn Model> = match (
        std::env::var("TAGLOOP_MODEL"),
        std::env::var("OPENAI_BASE_URL"),
    ) {
        (Ok(name), Ok(url)) => Arc::new(OpenAiModel::new(OpenAiConfig::new(url, name))?),
        _ => Arc::new(ScriptedModel::new(Arc::new(Script::parse(EPISODE)?))),
    };

    let mut tools = Registry::new();
    tools.add(Arc::new(tool_fn(
        "distance",
        "Road distance in km between two French cities.",
        |b: Between| async move {
            let km = match (b.from.as_str(), b.to.as_str()) {
                ("Paris", "Lyon") | ("Lyon", "Paris") => 465,
                ("Lyon", "Marseille") | ("Marseille", "Lyon") => 315,
                _ => {
                    return Err(ToolError::Failed(format!(
                        "no data for {} to {}",
                        b.from, b.to
                    )));
                }
            };
            Ok(format!("{km} km"))
        },
    )));

    let agent = Agent::builder(model)
        .tools(tools)
        .role(Role::for_type::<Trip>(
            "trip planner",
            "Plan road trips; add up the legs.",
        )?)
        .max_steps(6)
        .build()?;
    let outcome = agent
        .run_as::<Trip>("How far is Paris to Marseille by road, through Lyon?")
        .await?;
    println!(
        "status: {:?}, steps: {}, model calls: {}",
        outcome.status, outcome.progress.steps, outcome.progress.llm_calls
    );
    if let Some(trip) = outcome.final_answer {
        println!(
            "{} km over {} legs: {}",
            trip.total_km,
            trip.legs.len(),
            trip.legs.join(", ")
        );
    }
    Ok(())
}
