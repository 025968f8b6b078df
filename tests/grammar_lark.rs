//! The llguidance form on the wire (issue 24 item 3): llama.cpp gets the Lark text only when
//! `grammar_syntax` says the server has llguidance (a build without it aborts on one), GBNF by
//! default, and a refused Lark grammar falls back to GBNF before grammars are given up.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::fake_server::{FakeConfig, FakeServer};
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::llm::{
    Api, Constraint, GrammarSyntax, Message, Model, Prompt, Role, TurnGrammar, TurnRequest,
};

const TURN: &str = "<thought>t</thought><final_answer>ok</final_answer>";
const GBNF: &str = "root ::= \"<thought>\" [a-z]+ \"</thought>\"\n";
const LARK: &str = "%llguidance {}\nstart: root\nroot: \"<\" \"t\"\n";

fn request() -> TurnRequest {
    TurnRequest {
        prompt: Prompt::Chat(vec![Message::new(Role::User, "q")]),
        stop: vec!["</final_answer>".into()],
        grammar: Some(Arc::new(TurnGrammar {
            gbnf: GBNF.into(),
            lark: Some(LARK.into()),
            lazy: None,
        })),
        ..Default::default()
    }
}

async fn setup(reject: bool, syntax: GrammarSyntax) -> (FakeServer, OpenAiModel) {
    let mut fake = FakeConfig::turns([TURN, TURN, TURN]);
    fake.props = true;
    fake.reject_grammar = reject;
    let server = FakeServer::start(fake).await;
    let mut cfg = OpenAiConfig::new(&server.base_url, "fake-model");
    cfg.api = Api::Chat;
    cfg.retry_min_delay = Duration::from_millis(1);
    cfg.grammar_syntax = syntax;
    let model = OpenAiModel::new(cfg).expect("model");
    (server, model)
}

async fn turn(model: &OpenAiModel) -> Constraint {
    let mut sink = |_: &str| {};
    model
        .turn(&request(), &mut sink)
        .await
        .expect("turn")
        .constraint
}

fn grammars_sent(server: &FakeServer) -> Vec<Option<String>> {
    server
        .requests()
        .iter()
        .map(|r| {
            r.body
                .get("grammar")
                .and_then(|g| g.as_str())
                .map(str::to_owned)
        })
        .collect()
}

#[tokio::test]
async fn llama_cpp_gets_gbnf_unless_llguidance_is_stated() {
    let (server, model) = setup(false, GrammarSyntax::default()).await;
    assert_eq!(turn(&model).await, Constraint::Grammar);
    assert_eq!(grammars_sent(&server), [Some(GBNF.to_owned())]);

    let (server, model) = setup(false, GrammarSyntax::Llguidance).await;
    assert_eq!(turn(&model).await, Constraint::Grammar);
    assert_eq!(turn(&model).await, Constraint::Grammar);
    assert_eq!(
        grammars_sent(&server),
        [Some(LARK.to_owned()), Some(LARK.to_owned())]
    );
}

#[tokio::test]
async fn a_refused_lark_grammar_falls_back_to_gbnf_then_to_none() {
    let (server, model) = setup(true, GrammarSyntax::Llguidance).await;
    // Lark refused, GBNF refused too (this fake refuses every grammar), then none.
    assert_eq!(turn(&model).await, Constraint::None);
    assert_eq!(
        grammars_sent(&server),
        [Some(LARK.to_owned()), Some(GBNF.to_owned()), None]
    );
    assert!(model.grammar_rejected());
}

#[test]
fn the_syntax_reads_from_its_names() {
    assert_eq!("gbnf".parse(), Ok(GrammarSyntax::Gbnf));
    assert_eq!("llguidance".parse(), Ok(GrammarSyntax::Llguidance));
    assert!("auto".parse::<GrammarSyntax>().is_err());
}
