//! The OpenAI-compatible client against the fake server: the request, settings and checks its
//! tests share (tests/llm_openai.rs, tests/llm_failures.rs).

use std::time::Duration;

use super::fake_server::{FakeConfig, FakeServer};
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::llm::{Api, LlmError, Message, Model, Prompt, Role, TurnRequest, TurnResult};

/// A turn that runs past its action into an invented observation and answer.
pub const TURN: &str = "<thought>look at é.txt</thought>\n<action>read_file(path=\"é.txt\")</action>\n<observation>invented by the model</observation>\n<final_answer>made up</final_answer>";
/// [`TURN`] cut at its first stop.
pub const CUT: &str = "<thought>look at é.txt</thought>\n<action>read_file(path=\"é.txt\")";

/// (API, streamed).
pub const COMBOS: [(Api, bool); 4] = [
    (Api::Chat, true),
    (Api::Chat, false),
    (Api::Completions, true),
    (Api::Completions, false),
];

/// The loop's three stop strings.
pub fn stops() -> Vec<String> {
    vec![
        "</action>".into(),
        "<observation>".into(),
        "</final_answer>".into(),
    ]
}

/// A turn request for `api` with [`stops`], 512 tokens, temperature 0.
pub fn request(api: Api) -> TurnRequest {
    let prompt = match api {
        Api::Chat => Prompt::Chat(vec![
            Message::new(Role::System, "you are an agent"),
            Message::new(Role::User, "<question>read é.txt</question>"),
        ]),
        Api::Completions => Prompt::Text("<question>read é.txt</question>\n".into()),
    };
    TurnRequest {
        prompt,
        stop: stops(),
        max_tokens: Some(512),
        temperature: Some(0.0),
        ..Default::default()
    }
}

/// The client's settings for `server`: fast retries, short timeouts.
pub fn config(server: &FakeServer, api: Api, stream: bool) -> OpenAiConfig {
    let mut cfg = OpenAiConfig::new(&server.base_url, "fake-model");
    cfg.api = api;
    cfg.stream = stream;
    cfg.retry_min_delay = Duration::from_millis(1);
    cfg.retry_max_delay = Duration::from_millis(5);
    cfg.read_timeout = Duration::from_secs(5);
    cfg.turn_timeout = Some(Duration::from_secs(20));
    cfg
}

/// Run one turn; returns the result and the concatenated deltas.
pub async fn turn(model: &OpenAiModel, api: Api) -> (Result<TurnResult, LlmError>, String) {
    let req = request(api);
    let mut deltas = String::new();
    let mut sink = |d: &str| deltas.push_str(d);
    let r = model.turn(&req, &mut sink).await;
    (r, deltas)
}

/// A fake server started with `fake`, a client for it changed by `tweak`, and one turn.
pub async fn one(
    fake: FakeConfig,
    api: Api,
    stream: bool,
    tweak: impl FnOnce(&mut OpenAiConfig),
) -> (FakeServer, Result<TurnResult, LlmError>, String) {
    let server = FakeServer::start(fake).await;
    let mut cfg = config(&server, api, stream);
    tweak(&mut cfg);
    let model = OpenAiModel::new(cfg).expect("model");
    let (r, d) = turn(&model, api).await;
    (server, r, d)
}

/// The turn's result, checked: its deltas add up to its text, and no partial stop leaked.
pub fn ok(r: Result<TurnResult, LlmError>, deltas: &str, label: &str) -> TurnResult {
    let r = r.unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(deltas, r.text, "{label}: deltas must add up to the text");
    assert!(
        !deltas.contains("</act"),
        "{label}: a partial stop leaked: {deltas:?}"
    );
    r
}
