//! Unit tests of the client's pure parts (the HTTP behaviour is tested in tests/llm_openai.rs).

use super::errors::*;
use super::state::*;
use super::*;
use crate::llm::*;

#[test]
fn body_has_at_most_four_stops_and_token_field() {
    let mut cfg = OpenAiConfig::new("http://h/v1", "m");
    cfg.token_field = "max_completion_tokens".into();
    let model = OpenAiModel::new(cfg).unwrap();
    let req = TurnRequest {
        prompt: Prompt::Chat(vec![super::super::Message::new(
            super::super::Role::User,
            "hi",
        )]),
        stop: (0..6).map(|i| format!("s{i}")).collect(),
        max_tokens: Some(7),
        ..Default::default()
    };
    let b = model.request_body(&req, true, true).unwrap();
    assert_eq!(b["stop"].as_array().unwrap().len(), 4);
    assert_eq!(b["max_completion_tokens"], 7);
    assert_eq!(b["stream"], true);
    assert_eq!(b["stream_options"]["include_usage"], true);
    let b = model.request_body(&req, false, false).unwrap();
    assert!(b.get("stop").is_none());
    assert!(b.get("stream_options").is_none());
}

#[test]
fn the_streamed_body_written_from_the_messages_is_the_same_json() {
    use super::super::{Message, Role};
    let mut cfg = OpenAiConfig::new("http://h/v1", "m");
    cfg.extra
        .insert("cache_prompt".into(), serde_json::json!(true));
    let model = OpenAiModel::new(cfg).unwrap();
    let req = TurnRequest {
        prompt: Prompt::Chat(vec![
            Message::new(Role::System, "sys \"quoted\"\n"),
            Message::new(Role::User, "héllo <b>"),
        ]),
        stop: vec!["</action>".into()],
        temperature: Some(0.5),
        ..Default::default()
    };
    let fields = model.request_fields(&req, true, true).unwrap();
    let bytes = model.body_bytes(&req, &fields).unwrap();
    let streamed: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(streamed, model.request_body(&req, true, true).unwrap());
    // A configuration that overrides the model still wins.
    let mut cfg = OpenAiConfig::new("http://h/v1", "m");
    cfg.extra.insert("model".into(), serde_json::json!("other"));
    let model = OpenAiModel::new(cfg).unwrap();
    let fields = model.request_fields(&req, true, true).unwrap();
    let streamed: serde_json::Value =
        serde_json::from_slice(&model.body_bytes(&req, &fields).unwrap()).unwrap();
    assert_eq!(streamed["model"], "other");
    assert_eq!(streamed, model.request_body(&req, true, true).unwrap());
}

#[test]
fn infers_stripped_stop() {
    let stops: Vec<String> = vec![
        "</action>".into(),
        "<observation>".into(),
        "</final_answer>".into(),
    ];
    assert_eq!(
        which_stop("<thought>x</thought><action>f()", "", None, &stops).as_deref(),
        Some("</action>")
    );
    assert_eq!(
        which_stop("<final_answer>42", "", None, &stops).as_deref(),
        Some("</final_answer>")
    );
    assert_eq!(which_stop("plain", "", None, &stops), None);
    assert_eq!(
        which_stop("x", "</fin", None, &stops).as_deref(),
        Some("</final_answer>")
    );
    let sr = Value::String("<observation>".into());
    assert_eq!(
        which_stop("x", "", Some(&sr), &stops).as_deref(),
        Some("<observation>")
    );
}

#[test]
fn error_bodies_keep_their_message() {
    assert_eq!(
        error_message(r#"{"error":"model 'x' not found"}"#),
        "model 'x' not found"
    );
    assert_eq!(
        error_message(r#"{"error":{"code":400,"message":"bad"}}"#),
        "bad"
    );
    assert_eq!(error_message("<html>oops</html>"), "<html>oops</html>");
    assert!(names_stop(
        r#"{"error":{"message":"Unsupported parameter: 'stop' is not supported with this model.","param":"stop"}}"#
    ));
    assert!(!names_stop(r#"{"error":"context length exceeded"}"#));
}

#[test]
fn a_turn_keeps_sixteen_bytes_a_token_up_to_a_ceiling() {
    use super::state::{MAX_TURN_BYTES, TurnState};
    assert_eq!(TurnState::cap_for(Some(100)), 1600);
    assert_eq!(TurnState::cap_for(Some(0)), MAX_TURN_BYTES);
    assert_eq!(TurnState::cap_for(None), MAX_TURN_BYTES);
    assert_eq!(TurnState::cap_for(Some(u32::MAX)), MAX_TURN_BYTES);
}

#[test]
fn a_redirect_says_where_to_point_the_base_url() {
    let e = classify_status(307, None, Some("http://b/v1/x"), "", "http://a/v1", "m");
    assert_eq!(e.status(), Some(307));
    assert!(!e.is_retryable());
    let msg = e.to_string();
    assert!(msg.contains("redirects to http://b/v1/x"), "{msg}");
    assert!(msg.contains("--base-url"), "{msg}");
}
