//! The agent loop's own cost per step, with the scripted model in process and 10 trivial tools:
//! prompt appending, the model turn (stop scan, streaming in chunks), turn reading, parsing,
//! binding, the tool call, the observation, events. A 5-step and a 50-step episode show whether
//! the cost per step grows with the history.
//!
//! cargo bench --bench agent

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};

use tagloop::agent::Agent;
use tagloop::llm::{DeltaSink, Finish, Model, Prompt, TurnFuture, TurnRequest, TurnResult};
use tagloop::llm::{Script, ScriptedModel};
use tagloop::tools::{Registry, tool_fn};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    /// A path.
    path: String,
    /// A count.
    n: Option<i64>,
}

fn tools() -> Registry {
    let mut r = Registry::new();
    for i in 0..10 {
        r.add(Arc::new(tool_fn(
            &format!("tool_{i}"),
            "A trivial tool.",
            |a: Args| async move { Ok(format!("{} {}", a.path, a.n.unwrap_or(0))) },
        )));
    }
    r
}

fn script(steps: usize) -> Arc<Script> {
    let mut text = String::new();
    for i in 0..steps {
        text.push_str(&format!(
            "=== turn ===\n<thought>Step {i}: I look at the next file, which is the obvious thing to do now.</thought>\n<action>tool_{}(path=\"src/file_{i}.rs\", n={i})</action>\n",
            i % 10
        ));
    }
    text.push_str("=== turn ===\n<thought>Done.</thought>\n<final_answer>All files looked at.</final_answer>\n");
    Arc::new(Script::parse(&text).expect("script"))
}

/// A model that costs nothing: it answers turn k of an episode from the number of messages in the
/// prompt (so one agent can run episode after episode), already cut at the stop like a server.
struct Replay(Vec<String>);

impl Model for Replay {
    fn turn<'a>(&'a self, request: &'a TurnRequest, _on_delta: DeltaSink<'a>) -> TurnFuture<'a> {
        let k = match &request.prompt {
            Prompt::Chat(m) => (m.len() - 2) / 2,
            Prompt::Text(_) => 0,
        };
        let text = self.0[k.min(self.0.len() - 1)].clone();
        let finish = if text.contains("<action>") {
            Finish::Stop("</action>".into())
        } else {
            Finish::Stop("</final_answer>".into())
        };
        Box::pin(async move { Ok(TurnResult::new(text, finish)) })
    }

    fn describe(&self) -> String {
        "replay".into()
    }
}

/// The loop alone: the agent (and its system prompt) is built once; each iteration is one episode.
fn bench_loop_only(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("agent_loop_only");
    for steps in [5usize, 50] {
        let mut turns: Vec<String> = (0..steps)
            .map(|i| {
                format!(
                    "<thought>Step {i}: I look at the next file, which is the obvious thing to do now.</thought>\n<action>tool_{}(path=\"src/file_{i}.rs\", n={i})",
                    i % 10
                )
            })
            .collect();
        turns.push("<thought>Done.</thought>\n<final_answer>All files looked at.".into());
        let agent = Agent::builder(Arc::new(Replay(turns)))
            .tools(tools())
            .max_steps(steps as u32 + 1)
            .build()
            .expect("agent");
        group.bench_function(format!("{steps}_steps_10_tools"), |b| {
            b.iter(|| {
                let o = rt.block_on(agent.run("Look at every file."));
                assert_eq!(o.progress.steps as usize, steps);
                black_box(o)
            })
        });
    }
    group.finish();
}

fn bench_steps(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("agent_episode");
    for steps in [5usize, 50] {
        let script = script(steps);
        let tools = tools();
        group.bench_function(format!("{steps}_steps_10_tools"), |b| {
            b.iter(|| {
                let agent = Agent::builder(Arc::new(ScriptedModel::new(script.clone())))
                    .tools(tools.clone())
                    .max_steps(steps as u32 + 1)
                    .build()
                    .expect("agent");
                let o = rt.block_on(agent.run("Look at every file."));
                assert_eq!(o.progress.steps as usize, steps);
                black_box(o)
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(4));
    targets = bench_steps, bench_loop_only
}
criterion_main!(benches);
