//! A run through the real HTTP client against the fake llama.cpp, whose `/props` makes every
//! turn constrained (each request carries the turn grammar): what the guards of a constrained
//! turn are tested through (`agent_counting`, `agent_arguments_repeat`, `policy_switches`).

use std::sync::Arc;

use tagloop::agent::{Event, Outcome};
use tagloop::llm::Api;
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::policy::Policies;

use super::agent::{agent, collect_events, with_events};
use super::fake_server::{FakeConfig, FakeServer};

/// What a constrained run left: its outcome, the fake server (its requests) and the kinds of the
/// notices it told.
pub struct Ran {
    pub outcome: Outcome,
    pub server: FakeServer,
    pub notices: Vec<String>,
}

/// Run `task` over chat, three steps at most, the fake replying `turns` in order; every request
/// is checked to carry the grammar.
pub async fn run(task: &str, turns: Vec<String>) -> Ran {
    run_under(task, turns, Policies::all()).await
}

/// [`run`] with only `policies` on (`tests/policy_switches.rs`).
pub async fn run_under(task: &str, turns: Vec<String>, policies: Policies) -> Ran {
    let mut cfg = FakeConfig::turns(turns);
    cfg.props = true;
    let server = FakeServer::start(cfg).await;
    let mut mc = OpenAiConfig::new(server.base_url.clone(), "fake-model");
    mc.api = Api::Chat;
    let model = Arc::new(OpenAiModel::new(mc).expect("client builds"));
    let agent = agent(model, |c| {
        c.api = Api::Chat;
        c.max_steps = 3;
        c.policies = policies;
    });
    let (sink, events) = collect_events();
    let outcome = agent.run_with(task, with_events(sink)).await;
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.body.get("grammar").is_some()),
        "every turn is constrained"
    );
    let notices = events
        .lock()
        .expect("lock")
        .iter()
        .filter_map(|e| match e {
            Event::Notice { kind, .. } => Some(kind.clone()),
            _ => None,
        })
        .collect();
    Ran {
        outcome,
        server,
        notices,
    }
}

impl Ran {
    /// The last message of request `i`, and all its messages as one text.
    pub fn sent(&self, i: usize) -> (String, String) {
        let reqs = self.server.requests();
        let messages = reqs[i].body["messages"].as_array().expect("messages");
        let text = |m: &serde_json::Value| m["content"].as_str().unwrap_or("").to_string();
        let last = messages.last().map(text).unwrap_or_default();
        (
            last,
            messages.iter().map(text).collect::<Vec<_>>().join("\n"),
        )
    }

    /// Whether a notice of `kind` was told.
    pub fn told(&self, kind: tagloop::llm::NoticeKind) -> bool {
        self.notices.iter().any(|k| k == kind.as_str())
    }

    /// The final answer, when it is text.
    pub fn answer(&self) -> Option<&str> {
        self.outcome.final_answer.as_ref().and_then(|v| v.as_str())
    }
}
