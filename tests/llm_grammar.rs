//! Grammars on the wire: which field each server gets, detection of the server's kind, the
//! modes, and the 400 fallback (against the fake server).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::fake_server::{FakeConfig, FakeServer};
use serde_json::Value;
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::llm::{
    Api, Constraint, GrammarMode, LazyGrammar, Message, Model, Prompt, Role, ServerKind,
    TurnGrammar, TurnRequest,
};

const TURN: &str = "<thought>t</thought><final_answer>ok</final_answer>";

fn grammar(lazy: bool) -> Arc<TurnGrammar> {
    Arc::new(TurnGrammar {
        gbnf: "root ::= \"<thought>\" [a-z]+ \"</thought>\"\n".into(),
        lark: None,
        lazy: lazy.then(|| LazyGrammar {
            gbnf: "root ::= \"<final_answer>\" [a-z]+\n".into(),
            triggers: vec!["<action>".into(), "<final_answer>".into()],
        }),
    })
}

fn request(api: Api, lazy: bool) -> TurnRequest {
    TurnRequest {
        prompt: match api {
            Api::Chat => Prompt::Chat(vec![Message::new(Role::User, "q")]),
            Api::Completions => Prompt::Text("q\n<thought>".into()),
        },
        stop: vec!["</final_answer>".into()],
        grammar: Some(grammar(lazy)),
        ..Default::default()
    }
}

async fn model_for(
    server: &FakeServer,
    api: Api,
    tweak: impl FnOnce(&mut OpenAiConfig),
) -> OpenAiModel {
    let mut cfg = OpenAiConfig::new(&server.base_url, "fake-model");
    cfg.api = api;
    cfg.retry_min_delay = Duration::from_millis(1);
    tweak(&mut cfg);
    OpenAiModel::new(cfg).expect("model")
}

async fn one_turn(model: &OpenAiModel, api: Api, lazy: bool) -> Constraint {
    let mut sink = |_: &str| {};
    let r = model
        .turn(&request(api, lazy), &mut sink)
        .await
        .expect("turn");
    assert_eq!(r.text, "<thought>t</thought><final_answer>ok");
    r.constraint
}

/// The grammar fields of the last request.
fn sent(server: &FakeServer) -> Value {
    let reqs = server.requests();
    let body = &reqs.last().expect("a request").body;
    let mut out = serde_json::Map::new();
    for k in [
        "grammar",
        "grammar_lazy",
        "grammar_triggers",
        "preserved_tokens",
        "structured_outputs",
        "ebnf",
    ] {
        if let Some(v) = body.get(k) {
            out.insert(k.into(), v.clone());
        }
    }
    Value::Object(out)
}

#[tokio::test]
async fn llama_cpp_is_detected_by_props_and_gets_grammar_on_both_apis() {
    for api in [Api::Chat, Api::Completions] {
        let mut fake = FakeConfig::turns([TURN, TURN]);
        fake.props = true;
        let server = FakeServer::start(fake).await;
        let model = model_for(&server, api, |_| {}).await;
        assert_eq!(one_turn(&model, api, false).await, Constraint::Grammar);
        assert_eq!(model.server_kind().await, ServerKind::LlamaCpp);
        assert_eq!(
            sent(&server)["grammar"],
            Value::String(grammar(false).gbnf.clone())
        );
        // Detection runs once per client.
        let probes = server.probes();
        one_turn(&model, api, false).await;
        assert_eq!(server.probes(), probes, "{api:?}");
    }
}

#[tokio::test]
async fn vllm_and_sglang_are_detected_by_owned_by_and_get_their_own_fields() {
    for (owner, kind) in [
        ("vllm", ServerKind::Vllm),
        ("sglang", ServerKind::Sglang),
        ("llamacpp", ServerKind::LlamaCpp),
    ] {
        let mut fake = FakeConfig::turns([TURN]);
        fake.owned_by = Some(owner.into());
        let server = FakeServer::start(fake).await;
        let model = model_for(&server, Api::Chat, |_| {}).await;
        assert_eq!(
            one_turn(&model, Api::Chat, false).await,
            Constraint::Grammar,
            "{owner}"
        );
        assert_eq!(model.server_kind().await, kind);
        let g = Value::String(grammar(false).gbnf.clone());
        let fields = sent(&server);
        match kind {
            ServerKind::Vllm => assert_eq!(
                fields,
                serde_json::json!({"structured_outputs": {"grammar": g}})
            ),
            ServerKind::Sglang => assert_eq!(fields, serde_json::json!({"ebnf": g})),
            _ => assert_eq!(fields, serde_json::json!({"grammar": g})),
        }
    }
}

#[tokio::test]
async fn servers_without_grammars_get_none_in_auto_mode() {
    for owner in [Some("library"), Some("openai"), Some("someone"), None] {
        let mut fake = FakeConfig::turns([TURN]);
        fake.owned_by = owner.map(str::to_owned);
        let server = FakeServer::start(fake).await;
        let model = model_for(&server, Api::Chat, |_| {}).await;
        assert_eq!(
            one_turn(&model, Api::Chat, false).await,
            Constraint::None,
            "{owner:?}"
        );
        assert_eq!(sent(&server), serde_json::json!({}), "{owner:?}");
    }
}

#[tokio::test]
async fn modes_on_and_off_and_a_stated_kind() {
    // on: an unknown server gets llama.cpp's field; a server known to lack grammars gets none.
    let server = FakeServer::start(FakeConfig::turns([TURN])).await;
    let model = model_for(&server, Api::Chat, |c| c.grammar = GrammarMode::On).await;
    assert_eq!(
        one_turn(&model, Api::Chat, false).await,
        Constraint::Grammar
    );
    assert!(sent(&server).get("grammar").is_some());

    let mut fake = FakeConfig::turns([TURN]);
    fake.owned_by = Some("library".into());
    let server = FakeServer::start(fake).await;
    let model = model_for(&server, Api::Chat, |c| c.grammar = GrammarMode::On).await;
    assert_eq!(one_turn(&model, Api::Chat, false).await, Constraint::None);

    // off: never, and the model tells the loop not to build one.
    let mut fake = FakeConfig::turns([TURN]);
    fake.props = true;
    let server = FakeServer::start(fake).await;
    let model = model_for(&server, Api::Chat, |c| c.grammar = GrammarMode::Off).await;
    assert!(!model.wants_grammar());
    assert_eq!(one_turn(&model, Api::Chat, false).await, Constraint::None);
    assert_eq!(sent(&server), serde_json::json!({}));
    assert_eq!(server.probes(), 0, "no detection when no grammar is sent");

    // A stated kind is not probed.
    let server = FakeServer::start(FakeConfig::turns([TURN])).await;
    let model = model_for(&server, Api::Chat, |c| c.server = Some(ServerKind::Sglang)).await;
    assert_eq!(
        one_turn(&model, Api::Chat, false).await,
        Constraint::Grammar
    );
    assert!(sent(&server).get("ebnf").is_some());
    assert_eq!(server.probes(), 0);
}

#[tokio::test]
async fn lazy_grammars_go_to_llama_cpp_with_triggers() {
    let mut fake = FakeConfig::turns([TURN]);
    fake.props = true;
    let server = FakeServer::start(fake).await;
    let model = model_for(&server, Api::Completions, |_| {}).await;
    assert_eq!(
        one_turn(&model, Api::Completions, true).await,
        Constraint::LazyGrammar
    );
    assert_eq!(
        sent(&server),
        serde_json::json!({
            "grammar": "root ::= \"<final_answer>\" [a-z]+\n",
            "grammar_lazy": true,
            "grammar_triggers": [{"type": 1, "value": "<action>"}, {"type": 1, "value": "<final_answer>"}],
            "preserved_tokens": ["<action>", "<final_answer>"],
        })
    );
    // vLLM keeps reasoning apart itself: it gets the whole-turn grammar.
    let mut fake = FakeConfig::turns([TURN]);
    fake.owned_by = Some("vllm".into());
    let server = FakeServer::start(fake).await;
    let model = model_for(&server, Api::Chat, |_| {}).await;
    assert_eq!(one_turn(&model, Api::Chat, true).await, Constraint::Grammar);
}

#[tokio::test]
async fn a_server_that_refuses_the_grammar_is_asked_again_without_it_for_good() {
    for stream in [true, false] {
        let mut fake = FakeConfig::turns([TURN, TURN]);
        fake.owned_by = Some("vllm".into());
        fake.reject_grammar = true;
        let server = FakeServer::start(fake).await;
        let model = model_for(&server, Api::Chat, |c| c.stream = stream).await;
        assert_eq!(one_turn(&model, Api::Chat, false).await, Constraint::None);
        let reqs = server.requests();
        assert_eq!(reqs.len(), 2, "one refused, one without the grammar");
        assert!(reqs[0].body.get("structured_outputs").is_some());
        assert!(reqs[1].body.get("structured_outputs").is_none());
        assert!(model.grammar_rejected() && !model.wants_grammar());
        // Never sent again.
        assert_eq!(one_turn(&model, Api::Chat, false).await, Constraint::None);
        assert_eq!(server.request_count(), 3);
        assert!(
            server.requests()[2]
                .body
                .get("structured_outputs")
                .is_none()
        );
    }
}

#[tokio::test]
async fn once_the_server_is_known_to_take_no_grammar_none_is_built() {
    let mut fake = FakeConfig::turns([TURN]);
    fake.owned_by = Some("library".into());
    let server = FakeServer::start(fake).await;
    let model = model_for(&server, Api::Chat, |_| {}).await;
    assert!(model.wants_grammar(), "unknown until detected");
    one_turn(&model, Api::Chat, false).await;
    assert!(!model.wants_grammar(), "Ollama takes none");
    let server = FakeServer::start(FakeConfig::turns([TURN])).await;
    let model = model_for(&server, Api::Chat, |c| c.server = Some(ServerKind::Vllm)).await;
    assert!(model.wants_grammar());
    let model = model_for(&server, Api::Chat, |c| c.server = Some(ServerKind::OpenAi)).await;
    assert!(!model.wants_grammar());
}
