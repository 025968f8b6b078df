//! `tagloop serve`'s Responses face (`POST /v1/responses`) against the fake upstream: input
//! items and instructions, function calls with their `call_id`, reasoning items, each
//! `tool_choice`, parallel calls, `text.format`, custom tools, built-in tools left out with a
//! warning, a namespace's tools (the request Codex CLI sends), the streamed event sequence, a corrected turn that never reaches the client, errors
//! in the Responses shape, and the serve limits on this face. The stored conversations are
//! `tests/serve_responses_store.rs`.
#![cfg(feature = "serve")]

mod common;

use std::time::Duration;

use common::fake_server::{FakeConfig, FakeServer};
use common::responses::{CALL, ask, post, post_as, proxy, send, stream, tools, types};
use common::serve::{
    PIECES, assert_corrected_once, assert_sent_two_calls, fake_answering_in_pieces,
    fake_corrected_once, post_chat_twin, sent_text,
};
use serde_json::{Value, json};
use tagloop::secret::Secret;

#[tokio::test]
async fn a_call_is_a_function_call_item_after_the_reasoning_item() {
    let fake = FakeServer::start(FakeConfig::turns([CALL])).await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &ask(json!({}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["object"], "response");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["model"], "gpt-like");
    assert!(v["id"].as_str().unwrap().starts_with("resp_"), "{v}");
    assert_eq!(types(&v), ["reasoning", "function_call"]);
    assert_eq!(v["output"][0]["content"][0]["text"], "I need the weather.");
    let call = &v["output"][1];
    assert_eq!(call["name"], "weather");
    assert_eq!(call["status"], "completed");
    assert!(call["id"].as_str().unwrap().starts_with("fc_"));
    assert!(call["call_id"].as_str().unwrap().starts_with("call_"));
    let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city": "Paris", "days": 2}));
    assert!(v["usage"]["output_tokens"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["tools"][0]["name"], "weather");
    assert_eq!(v["instructions"], "Answer briefly.");
    let sent = sent_text(&fake.requests()[0].body);
    assert!(
        sent.contains("Answer briefly.") && sent.contains("Weather in Paris?"),
        "{sent}"
    );
}

#[tokio::test]
async fn an_answer_is_a_message_with_output_text() {
    let fake = FakeServer::start(FakeConfig::turns(["<final_answer>Sunny.</final_answer>"])).await;
    let base = proxy(&fake, |_| {}).await;
    let (status, v) = post(&base, &ask(json!({}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(types(&v), ["message"]);
    let message = &v["output"][0];
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["content"][0]["type"], "output_text");
    assert_eq!(message["content"][0]["text"], "Sunny.");
}

#[tokio::test]
async fn tool_choice_required_named_and_none_hold() {
    let other = "<action>time(city=\"Paris\")</action>";
    let fake = FakeServer::start(FakeConfig::turns([
        "<final_answer>Sunny.</final_answer>",
        CALL,
        other,
        CALL,
        CALL,
        "<final_answer>No tools.</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let (_, v) = post(&base, &ask(json!({"tool_choice": "required"}))).await;
    assert_eq!(
        types(&v).last().map(String::as_str),
        Some("function_call"),
        "{v}"
    );
    let named = json!({"tool_choice": {"type": "function", "name": "weather"}});
    let (_, v) = post(&base, &ask(named)).await;
    assert_eq!(
        v["output"].as_array().unwrap().last().unwrap()["name"],
        "weather",
        "{v}"
    );
    assert_eq!(
        v["tool_choice"],
        json!({"type": "function", "name": "weather"})
    );
    let (_, v) = post(&base, &ask(json!({"tool_choice": "none"}))).await;
    assert_eq!(types(&v), ["message"], "{v}");
    assert_eq!(
        fake.request_count(),
        6,
        "each choice corrected the turn once"
    );
}

#[tokio::test]
async fn parallel_calls_are_several_items_unless_disabled() {
    let two = "<action>weather(city=\"Paris\")</action>\n<action>time(city=\"Paris\")</action>";
    let fake = FakeServer::start(FakeConfig::turns([two, two])).await;
    let base = proxy(&fake, |_| {}).await;
    let both = json!({"input": "Weather and local time in Paris?"});
    let (_, v) = post(&base, &ask(both.clone())).await;
    assert_eq!(types(&v), ["function_call", "function_call"], "{v}");
    assert_ne!(v["output"][0]["call_id"], v["output"][1]["call_id"]);
    let mut single = both;
    single["parallel_tool_calls"] = json!(false);
    let (_, v) = post(&base, &ask(single)).await;
    assert_eq!(types(&v), ["function_call"], "{v}");
    assert_eq!(v["parallel_tool_calls"], false);
}

#[tokio::test]
async fn function_call_outputs_reach_the_upstream_as_results() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<final_answer>Sunny, 21 °C.</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let body = ask(json!({"input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather and time in Paris?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "I look both up."}]},
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{\"city\":\"Paris\"}"},
        {"type": "function_call", "call_id": "c2", "name": "time", "arguments": "{\"city\":\"Paris\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "Sunny, 21 °C"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "14:00"}]}
    ]}));
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["output"][0]["content"][0]["text"], "Sunny, 21 °C.");
    let sent = sent_text(&fake.requests()[0].body);
    assert_sent_two_calls(&sent);
    assert!(sent.contains("14:00"), "{sent}");
}

#[tokio::test]
async fn the_chat_and_responses_faces_send_the_upstream_the_same_request() {
    let fake = FakeServer::start(FakeConfig {
        default_reply: "<final_answer>Sunny.</final_answer>".into(),
        ..FakeConfig::default()
    })
    .await;
    let base = proxy(&fake, |_| {}).await;
    post_chat_twin(&base, &tools(), "parameters").await;
    let responses = ask(json!({"max_output_tokens": 99, "temperature": 0, "input": [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{\"city\":\"Paris\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "Sunny"}]}));
    let (status, v) = post(&base, &responses).await;
    assert_eq!(status, 200, "{v}");
    let sent = fake.requests();
    assert_eq!(sent[0].body, sent[1].body, "one conversation, one turn");
}

#[tokio::test]
async fn a_custom_tool_call_comes_back_with_its_input_and_built_in_tools_are_left_out() {
    let patch = "<action>apply_patch(input=\"*** Begin Patch\\n*** End Patch\")</action>";
    let fake = FakeServer::start(FakeConfig::turns([patch])).await;
    let base = proxy(&fake, |_| {}).await;
    let body = ask(json!({"input": "Apply the patch.", "tools": [
        {"type": "custom", "name": "apply_patch", "description": "Edit files with a patch.",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
        {"type": "web_search"},
        {"type": "local_shell"}]}));
    let (status, v) = post(&base, &body).await;
    assert_eq!(status, 200, "{v}");
    let call = &v["output"][0];
    assert_eq!(call["type"], "custom_tool_call", "{v}");
    assert_eq!(call["name"], "apply_patch");
    assert_eq!(call["input"], "*** Begin Patch\n*** End Patch");
    assert!(call["call_id"].as_str().unwrap().starts_with("call_"));
    let warnings = v["warnings"].to_string();
    assert!(
        warnings.contains("web_search") && warnings.contains("local_shell"),
        "{v}"
    );
    assert_eq!(v["tools"].as_array().unwrap().len(), 1, "{v}");
    let sent = fake.requests()[0].body.to_string();
    assert!(
        sent.contains("apply_patch") && !sent.contains("web_search"),
        "{sent}"
    );

    // Its output goes back as a result of that tool.
    let fake =
        FakeServer::start(FakeConfig::turns(["<final_answer>Patched.</final_answer>"])).await;
    let base = proxy(&fake, |_| {}).await;
    let back = ask(json!({"tools": body["tools"], "input": [
        {"role": "user", "content": "Apply the patch."},
        {"type": "custom_tool_call", "call_id": "c9", "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": "c9", "output": "applied"}]}));
    let (status, v) = post(&base, &back).await;
    assert_eq!(status, 200, "{v}");
    let sent = sent_text(&fake.requests()[0].body);
    assert!(sent.contains("<observation>\napplied"), "{sent}");
}

/// The shape Codex CLI 0.171 sends (captured): a streamed request with developer messages,
/// function tools, its sub-agent tools in a `namespace`, a built-in `web_search`, and fields
/// serve does not use (`include`, `prompt_cache_key`, `client_metadata`, `reasoning`).
fn codex_request(input: Value) -> Value {
    json!({"model": "qwen15", "stream": true, "input": input,
        "tools": [
            {"type": "function", "name": "exec_command", "description": "Run a command.", "strict": false,
             "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}},
                "required": ["cmd"], "additionalProperties": false}},
            {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.", "tools": [
                {"type": "function", "name": "spawn_agent", "description": "Start a sub-agent.", "strict": false,
                 "parameters": {"type": "object", "properties": {"message": {"type": "string"}},
                    "required": ["message"], "additionalProperties": false}}]},
            {"type": "web_search", "external_web_access": false}],
        "tool_choice": "auto", "parallel_tool_calls": true, "reasoning": {"summary": "auto"},
        "store": false, "include": ["reasoning.encrypted_content"], "prompt_cache_key": "0193",
        "client_metadata": {"session_id": "0193", "turn_id": "0194"}})
}

#[tokio::test]
async fn what_codex_sends_is_served_and_a_namespace_tool_is_called_by_its_own_name() {
    let spawn = "<action>multi_agent_v1__spawn_agent(message=\"Count the files.\")</action>";
    let fake = FakeServer::start(FakeConfig::turns([spawn])).await;
    let base = proxy(&fake, |_| {}).await;
    let input = json!([
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Count the files."}]}]);
    let events = stream(&base, &codex_request(input.clone())).await;
    let (_, done) = events
        .iter()
        .find(|(e, d)| e == "response.output_item.done" && d["item"]["type"] == "function_call")
        .expect("a function call");
    assert_eq!(done["item"]["name"], "spawn_agent", "{done}");
    assert_eq!(done["item"]["namespace"], "multi_agent_v1", "{done}");
    let (_, completed) = events.last().unwrap();
    assert_eq!(completed["type"], "response.completed");
    assert!(
        completed["response"]["warnings"]
            .to_string()
            .contains("web_search"),
        "{completed}"
    );
    let sent = fake.requests()[0].body.to_string();
    assert!(
        sent.contains("exec_command") && sent.contains("multi_agent_v1__spawn_agent"),
        "{sent}"
    );
    assert!(!sent.contains("web_search"), "{sent}");

    // Codex sends the call back with its namespace, and its output: a result of that tool.
    let fake = FakeServer::start(FakeConfig::turns(["<final_answer>Three.</final_answer>"])).await;
    let base = proxy(&fake, |_| {}).await;
    let mut next = input.as_array().unwrap().clone();
    next.push(
        json!({"type": "function_call", "call_id": done["item"]["call_id"],
        "name": "spawn_agent", "namespace": "multi_agent_v1",
        "arguments": "{\"message\":\"Count the files.\"}"}),
    );
    next.push(
        json!({"type": "function_call_output", "call_id": done["item"]["call_id"],
        "output": "3 files"}),
    );
    // Codex's goal objective: an output that answers no call (it was a 400).
    next.push(
        json!({"type": "function_call_output", "name": "goal_objective",
        "namespace": "agent", "output": "Count the files."}),
    );
    let events = stream(&base, &codex_request(Value::Array(next))).await;
    assert_eq!(events.last().unwrap().1["type"], "response.completed");
    let sent = sent_text(&fake.requests()[0].body);
    assert!(
        sent.contains("multi_agent_v1__spawn_agent(") && sent.contains("<observation>\n3 files"),
        "{sent}"
    );
    assert!(
        sent.contains("agent__goal_objective: Count the files."),
        "{sent}"
    );
}

#[tokio::test]
async fn a_json_schema_text_format_is_validated_and_bounded_as_response_format() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<final_answer>{\"city\": \"Paris\"}</final_answer>",
        "<final_answer>{\"city\": \"Paris\", \"sky\": \"clear\"}</final_answer>",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"},
        "sky": {"type": "string"}}, "required": ["city", "sky"]});
    let format =
        json!({"format": {"type": "json_schema", "name": "w", "schema": schema, "strict": true}});
    let (status, v) = post(&base, &ask(json!({"text": format, "tools": []}))).await;
    assert_eq!(status, 200, "{v}");
    let text = v["output"][0]["content"][0]["text"].as_str().unwrap();
    let answer: Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        answer["sky"], "clear",
        "the first answer missed `sky` and was corrected"
    );
    assert_eq!(v["text"]["format"]["name"], "w");
    assert_eq!(fake.request_count(), 2);
    let patterns: serde_json::Map<String, Value> = (0..40)
        .map(|i| {
            (
                format!("p{i}"),
                json!({"type": "string", "pattern": "^a+$"}),
            )
        })
        .collect();
    let many = json!({"format": {"type": "json_schema", "name": "w",
        "schema": {"type": "object", "properties": patterns}}});
    let (status, v) = post(&base, &ask(json!({"text": many}))).await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["param"], "text.format.schema", "{v}");
}

#[tokio::test]
async fn a_token_limit_makes_the_response_incomplete() {
    let fake = FakeServer::start(FakeConfig::turns([
        "<final_answer>Sunny and warm all day long.",
    ]))
    .await;
    let base = proxy(&fake, |_| {}).await;
    let (_, v) = post(&base, &ask(json!({"max_output_tokens": 6}))).await;
    assert_eq!(v["status"], "incomplete", "{v}");
    assert_eq!(v["incomplete_details"]["reason"], "max_output_tokens");
    assert_eq!(fake.requests()[0].body["max_tokens"], 6);
}

#[tokio::test]
async fn a_streamed_call_is_the_responses_event_sequence() {
    let fake = FakeServer::start(FakeConfig::turns([CALL])).await;
    let base = proxy(&fake, |_| {}).await;
    let events = stream(&base, &ask(json!({}))).await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.reasoning.delta",
            "response.reasoning.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    assert_eq!(events[0].1["response"]["status"], "in_progress");
    assert_eq!(events[0].1["response"]["output"], json!([]));
    let added = &events[8].1;
    assert_eq!(added["output_index"], 1);
    assert_eq!(added["item"]["arguments"], "");
    let args = events[9].1["delta"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(args).unwrap(),
        json!({"city": "Paris", "days": 2})
    );
    let done = &events[12].1["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"][1], events[11].1["item"]);
    assert!(done["usage"]["total_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn a_streamed_answer_goes_out_in_text_deltas_and_no_corrected_turn_leaks() {
    let answer = PIECES;
    let fake = fake_answering_in_pieces().await;
    let base = proxy(&fake, |_| {}).await;
    let events = stream(&base, &ask(json!({}))).await;
    let deltas: Vec<&str> = events
        .iter()
        .filter(|(n, _)| n == "response.output_text.delta")
        .map(|(_, d)| d["delta"].as_str().unwrap())
        .collect();
    assert!(deltas.len() > 1, "streamed in pieces: {deltas:?}");
    assert_eq!(deltas.concat(), answer);
    let done = events
        .iter()
        .find(|(n, _)| n == "response.output_text.done")
        .unwrap();
    assert_eq!(done.1["text"], answer);

    let fake = fake_corrected_once(CALL).await;
    let base = proxy(&fake, |_| {}).await;
    let events = stream(&base, &ask(json!({}))).await;
    let all: String = events.iter().map(|(_, d)| d.to_string()).collect();
    assert_corrected_once(&all, &fake);
}

#[tokio::test]
async fn errors_are_in_the_responses_shape() {
    let fake = FakeServer::start(FakeConfig {
        default_reply: "<action>weather(town=\"Paris\")</action>".into(),
        ..FakeConfig::default()
    })
    .await;
    let base = proxy(&fake, |c| c.repairs = 1).await;
    for (body, status, kind, param, words) in [
        ("{not json".to_string(), 400, "invalid_request_error", Value::Null, "not valid JSON"),
        (
            ask(json!({"tool_choice": {"type": "function", "name": "nope"}})).to_string(),
            400,
            "invalid_request_error",
            json!("tool_choice.name"),
            "nope",
        ),
        (
            ask(json!({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}))
                .to_string(),
            400,
            "invalid_request_error",
            json!("input[0].content[0]"),
            "input_image",
        ),
        (
            ask(json!({"previous_response_id": "resp_nothing"})).to_string(),
            400,
            "invalid_request_error",
            json!("previous_response_id"),
            "resp_nothing",
        ),
        (ask(json!({})).to_string(), 502, "upstream_error", Value::Null, "unknown argument `town`"),
    ] {
        let r = send(&base, reqwest::Method::POST, "/v1/responses", Some(body), None).await;
        assert_eq!(r.status().as_u16(), status);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["type"], kind, "{v}");
        assert_eq!(v["error"]["param"], param, "{v}");
        assert!(v["error"]["code"].is_string(), "{v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(words), "{v}");
    }
}

#[tokio::test]
async fn the_serve_limits_apply_to_this_face() {
    let fake = FakeServer::start(FakeConfig {
        default_reply: CALL.into(),
        first_byte_delay: Duration::from_millis(1500),
        ..FakeConfig::default()
    })
    .await;
    let base = proxy(&fake, |c| {
        c.max_body = 2000;
        c.concurrency = 1;
        c.api_key = Some(Secret::new("proxy-key"));
    })
    .await;
    let key = Some("proxy-key");
    let (status, v) = post(&base, &ask(json!({}))).await;
    assert_eq!(
        (status, &v["error"]["code"]),
        (401, &json!("invalid_api_key")),
        "{v}"
    );
    let (status, v) = post_as(&base, &ask(json!({"input": "x".repeat(3000)})), key).await;
    assert_eq!(
        (status, &v["error"]["code"]),
        (413, &json!("request_too_large")),
        "{v}"
    );
    let first = tokio::spawn({
        let base = base.clone();
        async move { post_as(&base, &ask(json!({})), Some("proxy-key")).await }
    });
    while fake.request_count() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = send(
        &base,
        reqwest::Method::POST,
        "/v1/responses",
        Some(ask(json!({})).to_string()),
        key,
    )
    .await;
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], "1");
    let r = send(
        &base,
        reqwest::Method::GET,
        "/v1/responses/resp_x",
        None,
        key,
    )
    .await;
    assert_eq!(r.status(), 429, "a stored response is read in a slot too");
    assert_eq!(first.await.unwrap().0, 200);

    let wide = proxy(&fake, |_| {}).await;
    let values = json!({"input": "hi", "metadata": {"a": vec![0; 300_000]}});
    let (status, v) = post(&wide, &values).await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("JSON values"),
        "{v}"
    );
    let slow = proxy(&fake, |c| c.timeout = Duration::from_millis(300)).await;
    let (status, v) = post(&slow, &ask(json!({}))).await;
    assert_eq!(
        (status, &v["error"]["code"]),
        (504, &json!("timeout")),
        "{v}"
    );
}
