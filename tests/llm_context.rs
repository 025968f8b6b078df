//! The model client's half of context fitting (issue 23), against fake servers: each server says
//! its window and the client reports it; a stated window beats the probe and asks nothing; the
//! server's tokenizer counts chat and completions prompts; a server without one is asked once;
//! every shape of "the prompt does not fit" comes out of `context_overflow()` with its numbers,
//! streamed and whole, and is not retried. The CLI's `--context-window` and `context = N`.

mod common;

use std::time::Duration;

use common::cli::Env;
use common::fake_server::{ContextShape, FakeConfig, FakeOllama, FakeServer, fake_tokens};
use tagloop::llm::openai::{OpenAiConfig, OpenAiModel};
use tagloop::llm::{
    Api, GrammarMode, LlmError, Message, Model, Prompt, Role, ServerKind, TurnRequest,
};
use tagloop::llm::{Script, ScriptedModel};
use tagloop::secret::Secret;

fn config(server: &FakeServer, api: Api, stream: bool) -> OpenAiConfig {
    let mut cfg = OpenAiConfig::new(&server.base_url, "fake-model");
    cfg.api = api;
    cfg.stream = stream;
    cfg.retry_min_delay = Duration::from_millis(1);
    cfg.retry_max_delay = Duration::from_millis(5);
    cfg.read_timeout = Duration::from_secs(5);
    cfg.turn_timeout = Some(Duration::from_secs(20));
    cfg
}

/// A client for `fake`, prepared as a run prepares it; the server stays up with it.
async fn prepared(
    fake: FakeConfig,
    tweak: impl FnOnce(&mut OpenAiConfig),
) -> (FakeServer, OpenAiModel) {
    let server = FakeServer::start(fake).await;
    let mut cfg = config(&server, Api::Chat, true);
    tweak(&mut cfg);
    let model = OpenAiModel::new(cfg).expect("model");
    model.prepare().await;
    (server, model)
}

fn chat() -> Prompt {
    Prompt::Chat(vec![
        Message::new(Role::System, "you are an agent"),
        Message::new(Role::User, "<question>read é.txt</question>"),
    ])
}

/// What the fake tokenizer counts for `chat()` once the fake template is applied.
fn chat_tokens() -> u64 {
    fake_tokens(
        "<|system|>\nyou are an agent\n<|user|>\n<question>read é.txt</question>\n<|assistant|>\n",
    )
}

#[tokio::test]
async fn each_server_shape_declares_its_window_and_the_client_reports_it() {
    let llama = FakeConfig {
        props: true,
        props_n_ctx: 2048,
        ..FakeConfig::default()
    };
    let vllm = FakeConfig {
        owned_by: Some("vllm".into()),
        max_model_len: Some(4096),
        ..FakeConfig::default()
    };
    let sglang = FakeConfig {
        owned_by: Some("sglang".into()),
        max_model_len: Some(16384),
        ..FakeConfig::default()
    };
    let ollama = |o: FakeOllama| FakeConfig {
        owned_by: Some("library".into()),
        ollama: Some(o),
        ..FakeConfig::default()
    };
    let cases = [
        ("llama.cpp /props", llama, Some(2048)),
        ("vLLM max_model_len", vllm, Some(4096)),
        ("SGLang max_model_len", sglang, Some(16384)),
        (
            "Ollama: a big model is served 4096",
            ollama(FakeOllama {
                model_context: 131072,
                ..FakeOllama::default()
            }),
            Some(4096),
        ),
        (
            "Ollama: a small model its own",
            ollama(FakeOllama {
                model_context: 2048,
                ..FakeOllama::default()
            }),
            Some(2048),
        ),
        (
            "Ollama: num_ctx",
            ollama(FakeOllama {
                model_context: 131072,
                num_ctx: Some(16384),
                ..FakeOllama::default()
            }),
            Some(16384),
        ),
        (
            "Ollama: the loaded model's allocation wins",
            ollama(FakeOllama {
                model_context: 131072,
                num_ctx: Some(16384),
                loaded: Some(8192),
            }),
            Some(8192),
        ),
        (
            "OpenAI: unknown",
            FakeConfig {
                owned_by: Some("openai".into()),
                ..FakeConfig::default()
            },
            None,
        ),
        ("an unknown server: unknown", FakeConfig::default(), None),
    ];
    for (what, fake, want) in cases {
        for grammar in [GrammarMode::Auto, GrammarMode::Off] {
            let server = FakeServer::start(fake.clone()).await;
            let mut cfg = config(&server, Api::Chat, true);
            cfg.grammar = grammar;
            let model = OpenAiModel::new(cfg).expect("model");
            assert_eq!(model.context_window(), None, "{what}: before prepare");
            model.prepare().await;
            assert_eq!(model.context_window(), want, "{what} ({grammar:?})");
            // Learned once: another run of the same client asks nothing more.
            let probes = server.probes();
            model.prepare().await;
            assert_eq!(server.probes(), probes, "{what}");
            assert_eq!(server.request_count(), 0, "{what}: no turn was asked for");
        }
    }
}

#[tokio::test]
async fn a_stated_kind_is_asked_only_where_that_kind_says_its_window() {
    let fake = FakeConfig {
        props: true,
        props_n_ctx: 1024,
        ..FakeConfig::default()
    };
    let (server, model) = prepared(fake, |c| {
        c.server = Some(ServerKind::LlamaCpp);
        c.grammar = GrammarMode::Off;
    })
    .await;
    assert_eq!(model.context_window(), Some(1024));
    assert_eq!(server.probes(), 1, "only /props");
    let fake = FakeConfig {
        max_model_len: Some(3000),
        ..FakeConfig::default()
    };
    let (_server, model) = prepared(fake, |c| c.server = Some(ServerKind::Vllm)).await;
    assert_eq!(model.context_window(), Some(3000));
    let (server, model) = prepared(FakeConfig::default(), |c| {
        c.server = Some(ServerKind::OpenAi);
    })
    .await;
    assert_eq!(model.context_window(), None);
    assert_eq!(server.probes(), 0, "no endpoint of OpenAI's says it");
}

#[tokio::test]
async fn a_stated_window_beats_the_probe_and_makes_no_request() {
    let fake = FakeConfig {
        props: true,
        props_n_ctx: 8192,
        owned_by: Some("library".into()),
        ollama: Some(FakeOllama {
            model_context: 2048,
            ..FakeOllama::default()
        }),
        ..FakeConfig::default()
    };
    let (server, model) = prepared(fake, |c| {
        c.context_window = Some(1000);
        c.grammar = GrammarMode::Off;
    })
    .await;
    assert_eq!(model.context_window(), Some(1000));
    assert_eq!(server.probes(), 0);
    assert_eq!(server.request_count(), 0);
    assert!(server.root_requests().is_empty());
}

#[tokio::test]
async fn concurrent_runs_share_one_probe() {
    let fake = FakeConfig {
        owned_by: Some("vllm".into()),
        max_model_len: Some(4096),
        ..FakeConfig::default()
    };
    let server = FakeServer::start(fake).await;
    let model = OpenAiModel::new(config(&server, Api::Chat, true)).expect("model");
    futures::future::join_all((0..8).map(|_| model.prepare())).await;
    assert_eq!(model.context_window(), Some(4096));
    // /props (404 here), then /v1/models: once, for all eight.
    assert_eq!(server.probes(), 2);
}

#[tokio::test]
async fn an_oversized_probe_answer_is_not_read() {
    let fake = FakeConfig {
        props: true,
        props_n_ctx: 2048,
        props_padding: 2 << 20,
        ..FakeConfig::default()
    };
    let (_server, model) = prepared(fake, |c| c.server = Some(ServerKind::LlamaCpp)).await;
    // The 2 MiB /props is refused unread; /v1/models (the fallback) says nothing.
    assert_eq!(model.context_window(), None);
}

#[tokio::test]
async fn the_servers_tokenizer_counts_chat_and_completions() {
    // llama.cpp: the chat template first, then /tokenize of its text.
    let fake = FakeConfig {
        props: true,
        tokenizer: true,
        ..FakeConfig::default()
    };
    let (server, model) = prepared(fake, |c| c.api_key = Secret::new("sk-count-1")).await;
    assert_eq!(
        model.count_tokens(&chat()).await.unwrap(),
        Some(chat_tokens())
    );
    let text = Prompt::Text("<question>read é.txt</question>\n".repeat(10));
    let Prompt::Text(t) = &text else {
        unreachable!()
    };
    assert_eq!(
        model.count_tokens(&text).await.unwrap(),
        Some(fake_tokens(t))
    );
    let asked = server.root_requests();
    let paths: Vec<&str> = asked.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["/apply-template", "/tokenize", "/tokenize"]);
    assert_eq!(asked[1].body["add_special"], true);
    assert_eq!(asked[2].body["content"].as_str(), Some(t.as_str()));
    for r in &asked {
        // The key goes in the header, and nowhere else.
        assert_eq!(r.authorization.as_deref(), Some("Bearer sk-count-1"));
        assert!(!r.body.to_string().contains("sk-count-1"));
    }
    assert_eq!(server.request_count(), 0, "counting asks for no turn");

    // vLLM: one /tokenize, the messages as they are; `count` read.
    let fake = FakeConfig {
        owned_by: Some("vllm".into()),
        tokenizer: true,
        ..FakeConfig::default()
    };
    let (server, model) = prepared(fake, |_| {}).await;
    assert_eq!(
        model.count_tokens(&chat()).await.unwrap(),
        Some(chat_tokens())
    );
    assert_eq!(
        model.count_tokens(&text).await.unwrap(),
        Some(fake_tokens(t))
    );
    let asked = server.root_requests();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[0].body["model"], "fake-model");
    assert_eq!(asked[0].body["add_generation_prompt"], true);
    assert!(asked[0].body["messages"].is_array());
    assert_eq!(asked[1].body["prompt"].as_str(), Some(t.as_str()));

    // SGLang: text only; a chat is not counted, and not asked about.
    let fake = FakeConfig {
        owned_by: Some("sglang".into()),
        tokenizer: true,
        ..FakeConfig::default()
    };
    let (server, model) = prepared(fake, |_| {}).await;
    assert_eq!(
        model.count_tokens(&text).await.unwrap(),
        Some(fake_tokens(t))
    );
    assert_eq!(model.count_tokens(&chat()).await.unwrap(), None);
    assert_eq!(server.root_requests().len(), 1);
}

#[tokio::test]
async fn a_server_without_a_tokenizer_answers_none_and_is_asked_once() {
    let fake = FakeConfig {
        props: true,
        tokenizer: false,
        ..FakeConfig::default()
    };
    let (server, model) = prepared(fake, |_| {}).await;
    for _ in 0..3 {
        assert_eq!(model.count_tokens(&chat()).await.unwrap(), None);
    }
    assert_eq!(server.root_requests().len(), 1, "the 404 is remembered");
    // Servers with no tokenizer endpoint at all are not asked.
    for owner in ["library", "openai", "someone"] {
        let fake = FakeConfig {
            owned_by: Some(owner.into()),
            ollama: Some(FakeOllama::default()),
            tokenizer: true,
            ..FakeConfig::default()
        };
        let (server, model) = prepared(fake, |_| {}).await;
        assert_eq!(model.count_tokens(&chat()).await.unwrap(), None, "{owner}");
        let tokenize = server.root_requests();
        assert!(
            tokenize.iter().all(|r| r.path.starts_with("/api/")),
            "{owner}: {:?}",
            tokenize.iter().map(|r| &r.path).collect::<Vec<_>>()
        );
    }
    // The scripted model counts nothing, and takes the window it is given.
    let script = std::sync::Arc::new(Script::parse("=== turn ===\nx").unwrap());
    let scripted = ScriptedModel::new(script).with_context_window(Some(512));
    assert_eq!(scripted.context_window(), Some(512));
    assert_eq!(scripted.count_tokens(&chat()).await.unwrap(), None);
}

fn request(api: Api) -> TurnRequest {
    let prompt = match api {
        Api::Chat => chat(),
        Api::Completions => Prompt::Text("<question>read é.txt</question>\n".into()),
    };
    TurnRequest {
        prompt,
        stop: vec!["</action>".into(), "<observation>".into()],
        max_tokens: Some(1000),
        ..Default::default()
    }
}

#[tokio::test]
async fn every_context_refusal_gives_its_numbers_streamed_and_whole_and_is_not_retried() {
    let shapes = [
        ContextShape::LlamaCpp,
        ContextShape::Vllm,
        ContextShape::Sglang,
        ContextShape::OpenAi,
        ContextShape::InBand,
    ];
    for shape in shapes {
        for (api, stream) in [
            (Api::Chat, true),
            (Api::Chat, false),
            (Api::Completions, true),
            (Api::Completions, false),
        ] {
            let fake = FakeConfig {
                context_error: Some(shape),
                ..FakeConfig::default()
            };
            let server = FakeServer::start(fake).await;
            let model = OpenAiModel::new(config(&server, api, stream)).expect("model");
            let mut sink = |_: &str| {};
            let err = model
                .turn(&request(api), &mut sink)
                .await
                .expect_err("refused");
            let what = format!("{shape:?} {api:?} stream={stream}: {err}");
            let overflow = err.context_overflow().expect(&what);
            assert_eq!(overflow.requested, Some(3000), "{what}");
            assert_eq!(overflow.window, Some(2048), "{what}");
            assert!(matches!(err, LlmError::ContextOverflow { .. }), "{what}");
            let in_band = shape == ContextShape::InBand && stream;
            assert_eq!(err.status(), (!in_band).then_some(400), "{what}");
            assert!(!err.is_retryable(), "{what}");
            // Asked once: neither retried nor asked again without `stop`.
            assert_eq!(server.request_count(), 1, "{what}");
            assert!(err.to_string().contains("context window"), "{what}");
        }
    }
}

#[test]
fn the_cli_refuses_a_window_that_is_not_a_number_of_tokens() {
    let env = Env::new();
    std::fs::write(
        env.path("s.txt"),
        "=== turn ===\n<final_answer>1</final_answer>\n",
    )
    .unwrap();
    for bad in ["0", "many", "-5", "1.5"] {
        let out = env
            .cmd()
            .args(["run", "--model", "scripted:s.txt"])
            // `=`: clap would take `-5` for a flag of its own.
            .arg(format!("--context-window={bad}"))
            .arg("t")
            .assert()
            .code(2);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(stderr.contains("--context-window"), "{bad}: {stderr}");
        assert!(
            stderr.contains("number of tokens") || stderr.contains("at least 1"),
            "{bad}: {stderr}"
        );
    }
    env.cmd()
        .args([
            "run",
            "--model",
            "scripted:s.txt",
            "--context-window",
            "4096",
            "t",
        ])
        .assert()
        .code(0);
}

#[tokio::test]
async fn context_in_tagloop_toml_is_read_and_checked() {
    // A provider's stated window: no probe is made (the server would say 8192).
    let fake = FakeConfig {
        props: true,
        ..FakeConfig::turns(["<final_answer>1</final_answer>"])
    };
    let server = FakeServer::start(fake).await;
    let env = Env::new();
    let toml = |context: &str| {
        format!(
            "[providers.lab]\nbase_url = \"{}\"\n{context}\n[models.small]\nprovider = \"lab\"\nmodel = \"fake-model\"\n",
            server.base_url
        )
    };
    std::fs::write(env.path("tagloop.toml"), toml("context = 16384")).unwrap();
    let run = |env: &Env| {
        let mut cmd = env.cmd();
        cmd.args(["run", "--model", "small", "--grammar", "off", "t"]);
        cmd
    };
    let cmd = run(&env);
    tokio::task::spawn_blocking(move || {
        let mut cmd = cmd;
        cmd.assert().code(0);
    })
    .await
    .unwrap();
    assert_eq!(server.request_count(), 1);
    assert_eq!(server.probes(), 0, "the stated window needs no probe");
    // Without it, the run asks the server.
    std::fs::write(env.path("tagloop.toml"), toml("")).unwrap();
    let cmd = run(&env);
    tokio::task::spawn_blocking(move || {
        let mut cmd = cmd;
        cmd.assert().code(0);
    })
    .await
    .unwrap();
    assert!(server.probes() > 0);
    // 0 or a non-number is a usage error naming the file.
    for bad in ["context = 0", "context = \"big\""] {
        std::fs::write(env.path("tagloop.toml"), toml(bad)).unwrap();
        let cmd = run(&env);
        let out = tokio::task::spawn_blocking(move || {
            let mut cmd = cmd;
            cmd.assert().code(2).get_output().stderr.clone()
        })
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&out).into_owned();
        assert!(stderr.contains("tagloop.toml"), "{bad}: {stderr}");
    }
}
