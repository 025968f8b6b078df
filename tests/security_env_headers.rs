//! The client sends a server only the headers tagloop's configuration names: never
//! `OPENAI_ORG_ID` or `OPENAI_PROJECT_ID` from the environment (the client library whole answers
//! once went through added them to every whole request, whatever the server, and panicked on a
//! value a header cannot hold). Its own test binary: it sets process environment variables.

mod common;

use common::fake_server::{FakeConfig, FakeServer};
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::llm::{Message, Model, Prompt, Role, TurnRequest};

#[tokio::test]
async fn organization_and_project_from_the_environment_reach_no_server() {
    // SAFETY: the only test of this binary; nothing else reads the environment concurrently.
    unsafe {
        std::env::set_var("OPENAI_ORG_ID", "org-from-env\nsecond line");
        std::env::set_var("OPENAI_PROJECT_ID", "proj-from-env");
    }
    let server = FakeServer::start(FakeConfig::turns(["<final_answer>ok</final_answer>"])).await;
    for stream in [false, true] {
        let mut cfg = OpenAiConfig::new(&server.base_url, "m");
        cfg.stream = stream;
        cfg.max_retries = 0;
        let model = OpenAiModel::new(cfg).unwrap();
        let req = TurnRequest {
            prompt: Prompt::Chat(vec![Message::new(Role::User, "hi")]),
            stop: vec!["</final_answer>".into()],
            ..Default::default()
        };
        let mut sink = |_: &str| {};
        let result = model.turn(&req, &mut sink).await;
        assert!(result.is_ok(), "stream={stream}: {result:?}");
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for r in requests {
        for name in &r.header_names {
            assert!(
                name != "openai-organization" && name != "openai-project",
                "{name} was sent: {:?}",
                r.header_names
            );
        }
    }
}
