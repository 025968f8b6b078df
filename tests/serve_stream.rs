//! `tagloop serve`'s streamed chunks, driven on their own: `sse_response` mounted on a tiny
//! router of the test's own, fed hand-made event streams; the SSE body is read back and every
//! chunk checked against OpenAI's `chat.completion.chunk` shape, in the order a client expects.
//! The pass-through (`Upstream`) is in serve_passthrough.rs.

#![cfg(feature = "serve")]

mod common;

use axum::Router;
use axum::routing::get;
use serde_json::{Value, json};
use tagloop::llm::Usage;
use tagloop::serve::testing::{ChunkMeta, sse_response};
use tagloop::serve::{FinishReason, ServeEvent, ToolCallOut};

use common::serve::{datas, delta};
/// Serve `app` on a free loopback port: `http://127.0.0.1:PORT`.
use common::serve_on_loopback as spawn;

// ---------------------------------------------------------------------------------------------
// Streamed chunks
// ---------------------------------------------------------------------------------------------

fn meta() -> ChunkMeta {
    ChunkMeta {
        id: "chatcmpl-test-1".into(),
        model: "client-model".into(),
        created: 1_700_000_000,
    }
}

/// The `data:` payloads of an answer made of `events`, read through HTTP as a client reads them.
async fn stream_of(events: Vec<ServeEvent>, include_usage: bool) -> Vec<String> {
    let app = Router::new().route(
        "/s",
        get(move || {
            let events = events.clone();
            async move { sse_response(meta(), include_usage, futures::stream::iter(events)) }
        }),
    );
    let base = spawn(app).await;
    let response = reqwest::get(format!("{base}/s")).await.expect("get");
    assert_eq!(response.status(), 200);
    let ct = response.headers()["content-type"].to_str().expect("ct");
    assert!(ct.starts_with("text/event-stream"), "{ct}");
    let body = response.text().await.expect("body");
    datas(&body)
}

/// Parse every chunk but the last (`[DONE]`), checking OpenAI's chunk shape.
fn chunks(datas: &[String], include_usage: bool) -> Vec<Value> {
    assert_eq!(
        datas.last().map(String::as_str),
        Some("[DONE]"),
        "{datas:?}"
    );
    let body = &datas[..datas.len() - 1];
    let parsed: Vec<Value> = body
        .iter()
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
        .collect();
    for c in &parsed {
        if c.get("error").is_some() {
            continue;
        }
        assert_eq!(c["object"], "chat.completion.chunk", "{c}");
        assert_eq!(c["id"], "chatcmpl-test-1", "{c}");
        assert_eq!(c["model"], "client-model", "{c}");
        assert_eq!(c["created"], 1_700_000_000u64, "{c}");
        assert_eq!(c.get("usage").is_some(), include_usage, "{c}");
        let choices = c["choices"].as_array().expect("choices");
        if choices.is_empty() {
            assert!(include_usage, "only the usage chunk has no choice: {c}");
            continue;
        }
        assert_eq!(choices.len(), 1, "{c}");
        assert_eq!(choices[0]["index"], 0, "{c}");
        assert!(choices[0]["delta"].is_object(), "{c}");
        let fr = &choices[0]["finish_reason"];
        assert!(fr.is_null() || fr.is_string(), "{c}");
    }
    parsed
}

fn finish(c: &Value) -> &Value {
    &c["choices"][0]["finish_reason"]
}

fn done(finish_reason: FinishReason) -> ServeEvent {
    ServeEvent::Done {
        finish_reason,
        usage: Usage {
            prompt_tokens: 30,
            completion_tokens: 12,
        },
    }
}

fn call(index: u32, name: &str, arguments: &str) -> ServeEvent {
    ServeEvent::ToolCall(ToolCallOut {
        index,
        id: format!("call_{index}"),
        name: name.into(),
        arguments: arguments.into(),
    })
}

#[tokio::test]
async fn an_answer_is_role_then_content_then_stop_then_done() {
    let events = vec![
        ServeEvent::Content("Hel".into()),
        ServeEvent::Content("lo \"you\"\n".into()),
        done(FinishReason::Stop),
    ];
    let c = chunks(&stream_of(events, false).await, false);
    assert_eq!(c.len(), 4, "{c:?}");
    assert_eq!(delta(&c[0]), &json!({"role": "assistant"}));
    assert!(finish(&c[0]).is_null());
    assert_eq!(delta(&c[1]), &json!({"content": "Hel"}));
    assert_eq!(delta(&c[2]), &json!({"content": "lo \"you\"\n"}));
    assert_eq!(delta(&c[3]), &json!({}));
    assert_eq!(finish(&c[3]), "stop");
}

#[tokio::test]
async fn reasoning_comes_as_reasoning_content_before_the_answer() {
    let events = vec![
        ServeEvent::Reasoning("I should ".into()),
        ServeEvent::Reasoning("greet.".into()),
        ServeEvent::Content("Hi".into()),
        done(FinishReason::Stop),
    ];
    let c = chunks(&stream_of(events, false).await, false);
    let deltas: Vec<&Value> = c.iter().map(delta).collect();
    assert_eq!(
        deltas,
        [
            &json!({"role": "assistant"}),
            &json!({"reasoning_content": "I should "}),
            &json!({"reasoning_content": "greet."}),
            &json!({"content": "Hi"}),
            &json!({}),
        ]
    );
}

#[tokio::test]
async fn each_tool_call_is_one_whole_chunk_and_the_answer_ends_with_tool_calls() {
    let args0 = r#"{"city":"Paris","units":"metric"}"#;
    let args1 = r#"{"q":"a \"quoted\" term"}"#;
    for events in [
        vec![call(0, "get_weather", args0), done(FinishReason::ToolCalls)],
        vec![
            ServeEvent::Reasoning("two lookups".into()),
            call(0, "get_weather", args0),
            call(1, "search", args1),
            done(FinishReason::ToolCalls),
        ],
    ] {
        let n_calls = events
            .iter()
            .filter(|e| matches!(e, ServeEvent::ToolCall(_)))
            .count();
        let c = chunks(&stream_of(events, false).await, false);
        let calls: Vec<&Value> = c
            .iter()
            .filter_map(|c| delta(c).get("tool_calls"))
            .collect();
        assert_eq!(calls.len(), n_calls, "one chunk per call: {c:?}");
        for (i, tc) in calls.iter().enumerate() {
            let (name, args) = [("get_weather", args0), ("search", args1)][i];
            assert_eq!(
                **tc,
                json!([{"index": i, "id": format!("call_{i}"), "type": "function",
                        "function": {"name": name, "arguments": args}}])
            );
            // The arguments are a JSON object's text, as OpenAI sends them.
            let parsed: Value =
                serde_json::from_str(tc[0]["function"]["arguments"].as_str().expect("str"))
                    .expect("arguments parse");
            assert!(parsed.is_object());
        }
        let last = c.last().expect("chunks");
        assert_eq!(finish(last), "tool_calls");
        assert!(c[..c.len() - 1].iter().all(|c| finish(c).is_null()));
    }
}

#[tokio::test]
async fn usage_comes_in_a_last_choiceless_chunk_only_when_asked() {
    let events = vec![ServeEvent::Content("ok".into()), done(FinishReason::Stop)];
    let without = chunks(&stream_of(events.clone(), false).await, false);
    assert!(without.iter().all(|c| c.get("usage").is_none()));
    assert!(
        without
            .iter()
            .all(|c| !c["choices"].as_array().expect("a").is_empty())
    );

    let with = chunks(&stream_of(events, true).await, true);
    let (last, before) = with.split_last().expect("chunks");
    assert_eq!(last["choices"], json!([]));
    assert_eq!(
        last["usage"],
        json!({"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42})
    );
    // As OpenAI: `"usage": null` on every chunk before it.
    assert!(before.iter().all(|c| c["usage"].is_null()), "{before:?}");
    assert_eq!(finish(before.last().expect("finish chunk")), "stop");
}

#[tokio::test]
async fn events_that_end_without_done_end_in_an_openai_error_event_then_done() {
    for events in [
        vec![],
        vec![ServeEvent::Content("partial".into())],
        vec![call(0, "f", "{}")],
    ] {
        let d = stream_of(events, true).await;
        let c = chunks(&d, true);
        let last = c.last().expect("chunks");
        // What OpenAI sends for a failure mid-stream, and what its SDKs raise `APIError` on.
        assert_eq!(last.as_object().map(|o| o.len()), Some(1), "{last}");
        assert_eq!(last["error"]["type"], "server_error");
        assert!(
            last["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
        assert!(last["error"]["param"].is_null() && last["error"]["code"].is_null());
        // No chunk claimed the answer was complete.
        assert!(c.iter().all(|c| finish(c).is_null()), "{c:?}");
        assert!(c.iter().all(|c| !c["usage"].is_object()), "{c:?}");
    }
}

#[tokio::test]
async fn nothing_after_done_is_sent() {
    let events = vec![
        done(FinishReason::Length),
        ServeEvent::Content("late".into()),
    ];
    let c = chunks(&stream_of(events, false).await, false);
    assert_eq!(c.len(), 2, "{c:?}");
    assert_eq!(finish(&c[1]), "length");
}
