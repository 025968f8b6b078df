//! The server's own endpoints beside the completions, as llama.cpp, vLLM and Ollama serve them:
//! `/props`, `/v1/models`, `/tokenize`, `/apply-template`, `/api/ps`, `/api/show`; and what
//! they record.

use super::*;

/// Note a request's path in the arrival order.
pub(super) fn record_sequence(inner: &Inner, path: &str) {
    if let Ok(mut seq) = inner.sequence.lock() {
        seq.push(path.to_owned());
    }
}

/// Keep a request to one of the root's own endpoints; its JSON body (`Null` if none).
pub(super) fn record_root(inner: &Inner, path: &str, headers: &HeaderMap, body: &Bytes) -> Value {
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    record_sequence(inner, path);
    if let Ok(mut reqs) = inner.root_requests.lock() {
        reqs.push(RecordedRequest {
            path: path.to_owned(),
            body: body.clone(),
            authorization: headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            header_names: headers.keys().map(|k| k.as_str().to_owned()).collect(),
        });
    }
    body
}

/// The fake chat template: `<|role|>\ncontent\n` per message, then the assistant's opening.
pub(super) fn fake_template(messages: &Value) -> String {
    let mut out = String::new();
    for m in messages.as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("user");
        let content = m["content"].as_str().unwrap_or("");
        out.push_str(&format!("<|{role}|>\n{content}\n"));
    }
    out.push_str("<|assistant|>\n");
    out
}

/// The fake tokenizer's count: one token per 4 bytes, rounded up.
pub fn fake_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

pub(super) async fn tokenize(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body = record_root(&inner, "/tokenize", &headers, &body);
    if !inner.cfg.tokenizer {
        return json_response(StatusCode::NOT_FOUND, "{\"error\":\"not found\"}".into());
    }
    let text = match (&body["content"], &body["prompt"]) {
        (Value::String(c), _) | (_, Value::String(c)) => c.clone(),
        _ => fake_template(&body["messages"]),
    };
    let n = fake_tokens(&text) * inner.cfg.tokenize_percent / 100;
    let ids: Vec<u64> = (0..n).map(|i| 1000 + i % 50_000).collect();
    let answer = if inner.cfg.owned_by.as_deref() == Some("vllm") {
        json!({"count": n, "max_model_len": inner.cfg.max_model_len, "tokens": ids})
    } else {
        json!({ "tokens": ids })
    };
    json_response(StatusCode::OK, answer.to_string())
}

pub(super) async fn apply_template(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body = record_root(&inner, "/apply-template", &headers, &body);
    if !inner.cfg.tokenizer {
        return json_response(StatusCode::NOT_FOUND, "{\"error\":\"not found\"}".into());
    }
    json_response(
        StatusCode::OK,
        json!({ "prompt": fake_template(&body["messages"]) }).to_string(),
    )
}

pub(super) async fn ollama_ps(State(inner): State<Arc<Inner>>, headers: HeaderMap) -> Response {
    inner.probes.fetch_add(1, Ordering::SeqCst);
    record_root(&inner, "/api/ps", &headers, &Bytes::new());
    let Some(ollama) = &inner.cfg.ollama else {
        return json_response(StatusCode::NOT_FOUND, "404 page not found".into());
    };
    let models: Vec<Value> = ollama
        .loaded
        .iter()
        .map(|n| json!({"name": "fake-model:latest", "model": "fake-model:latest", "size": 1, "context_length": n}))
        .collect();
    json_response(StatusCode::OK, json!({ "models": models }).to_string())
}

pub(super) async fn ollama_show(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    inner.probes.fetch_add(1, Ordering::SeqCst);
    record_root(&inner, "/api/show", &headers, &body);
    let Some(ollama) = &inner.cfg.ollama else {
        return json_response(StatusCode::NOT_FOUND, "404 page not found".into());
    };
    let mut parameters = "stop \"<|im_end|>\"".to_owned();
    if let Some(n) = ollama.num_ctx {
        parameters.push_str(&format!("\nnum_ctx                        {n}"));
    }
    json_response(
        StatusCode::OK,
        json!({"parameters": parameters, "model_info": {"general.architecture": "fake", "fake.context_length": ollama.model_context}}).to_string(),
    )
}

pub(super) async fn props(State(inner): State<Arc<Inner>>) -> Response {
    inner.probes.fetch_add(1, Ordering::SeqCst);
    if !inner.cfg.props {
        return json_response(StatusCode::NOT_FOUND, "{\"error\":\"not found\"}".into());
    }
    json_response(
        StatusCode::OK,
        json!({"default_generation_settings": {"n_ctx": inner.cfg.props_n_ctx}, "total_slots": 1, "model_path": "m.gguf", "padding": "x".repeat(inner.cfg.props_padding), "chat_template": inner.cfg.chat_template, "bos_token": "", "eos_token": "<|im_end|>"}).to_string(),
    )
}

pub(super) async fn models(State(inner): State<Arc<Inner>>, headers: HeaderMap) -> Response {
    inner.probes.fetch_add(1, Ordering::SeqCst);
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Ok(mut lists) = inner.model_lists.lock() {
        lists.push(auth);
    }
    let owner = inner
        .cfg
        .owned_by
        .clone()
        .unwrap_or_else(|| "organization-owner".into());
    json_response(
        StatusCode::OK,
        json!({"object": "list", "data": inner
            .cfg
            .served_models
            .clone()
            .unwrap_or_else(|| vec!["fake-model".into()])
            .iter()
            .map(|id| match inner.cfg.max_model_len {
                Some(n) => json!({"id": id, "object": "model", "owned_by": owner, "max_model_len": n}),
                None => json!({"id": id, "object": "model", "owned_by": owner}),
            })
            .collect::<Vec<_>>()})
        .to_string(),
    )
}

pub(super) fn json_response(status: StatusCode, body: String) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap_or_default()
}
