//! How the client uses its connections to a local server.

mod common;

use common::fake_server::{FakeConfig, FakeServer};
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::llm::{Api, Message, Model, Prompt, Role, TurnRequest};

/// llama-server closes a connection after a streamed answer without a `Connection: close`, and
/// a request sent on it later fails (and waits for a retry). Over plain HTTP a streamed turn
/// asks for the close itself, so its connection is never reused; whole answers keep theirs.
#[tokio::test]
async fn streamed_turns_over_plain_http_ask_for_the_connection_to_close() {
    for stream in [true, false] {
        let server =
            FakeServer::start(FakeConfig::turns(["<final_answer>a</final_answer>"; 3])).await;
        let mut cfg = OpenAiConfig::new(&server.base_url, "fake-model");
        cfg.api = Api::Chat;
        cfg.stream = stream;
        let model = OpenAiModel::new(cfg).expect("model");
        let req = TurnRequest {
            prompt: Prompt::Chat(vec![Message::new(Role::User, "hi")]),
            ..Default::default()
        };
        for _ in 0..3 {
            let r = model.turn(&req, &mut |_| {}).await.expect("a turn");
            assert_eq!(r.text, "<final_answer>a</final_answer>");
        }
        let reqs = server.requests();
        assert_eq!(reqs.len(), 3, "no retry");
        for r in &reqs {
            assert_eq!(
                r.header_names.iter().any(|h| h == "connection"),
                stream,
                "stream={stream}: {:?}",
                r.header_names
            );
        }
    }
}
