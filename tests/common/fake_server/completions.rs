//! `/v1/chat/completions` and `/v1/completions`: the scripted turn, whole or streamed, with the
//! stops, limits, failures and cuts the configuration asks for.

use super::*;

pub(super) async fn handle(
    State(inner): State<Arc<Inner>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let cfg = &inner.cfg;
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let path = uri.path().to_owned();
    if super::guess::is_guess(&body) {
        return super::guess::answer(&inner, body, path.ends_with("/chat/completions")).await;
    }
    let index = {
        let mut reqs = inner.requests.lock().unwrap_or_else(|e| e.into_inner());
        reqs.push(RecordedRequest {
            path: path.clone(),
            body: body.clone(),
            authorization: authorization.clone(),
            header_names: headers.keys().map(|k| k.as_str().to_owned()).collect(),
        });
        reqs.len() - 1
    };
    record_sequence(&inner, &path);
    let chat = path.ends_with("/chat/completions");
    if let Some((status, bytes)) = cfg.huge_body {
        return huge_body(&inner, status, bytes);
    }

    if let Some(key) = &cfg.require_key
        && authorization.as_deref() != Some(format!("Bearer {key}").as_str())
    {
        return json_response(
            StatusCode::UNAUTHORIZED,
            json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}).to_string(),
        );
    }
    let model = body["model"].as_str().unwrap_or("").to_owned();
    if !cfg.known_models.is_empty() && !cfg.known_models.contains(&model) {
        return json_response(
            StatusCode::NOT_FOUND,
            json!({"error": format!("model \"{model}\" not found, try pulling it first")})
                .to_string(),
        );
    }
    if index < cfg.fail_first {
        return Response::builder()
            .status(StatusCode::INTERNAL_SERVER_ERROR)
            .header("content-type", "text/plain")
            .body(Body::from("Internal Server Error: the model crashed"))
            .unwrap_or_default();
    }
    if index < cfg.fail_first + cfg.rate_limit_first {
        let mut b = Response::builder()
            .status(StatusCode::TOO_MANY_REQUESTS)
            .header("content-type", "application/json");
        if let Some(ra) = &cfg.retry_after {
            b = b.header("retry-after", ra.as_str());
        }
        return b
            .body(Body::from(json!({"error": {"code": 429, "message": "server busy", "type": "unavailable_error"}}).to_string()))
            .unwrap_or_default();
    }
    if let Some(shape) = cfg.context_error {
        if shape == ContextShape::InBand && body["stream"].as_bool() == Some(true) {
            return Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "text/event-stream")
                .body(Body::from(format!(
                    "data: {}\n\ndata: [DONE]\n\n",
                    shape.error()
                )))
                .unwrap_or_default();
        }
        return json_response(StatusCode::BAD_REQUEST, shape.error().to_string());
    }
    let max_tokens = body["max_tokens"]
        .as_u64()
        .or_else(|| body["max_completion_tokens"].as_u64());
    let true_tokens = FakeServer::prompt_tokens(&body);
    if cfg.enforce_window && true_tokens + max_tokens.unwrap_or(0) > cfg.props_n_ctx {
        // llama.cpp's words and fields (server-common: `exceed_context_size_error`).
        inner.refused.fetch_add(1, Ordering::SeqCst);
        let n_ctx = cfg.props_n_ctx;
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": {"code": 400, "message": format!("request ({true_tokens} tokens) exceeds the available context size ({n_ctx} tokens), try increasing it"), "type": "exceed_context_size_error", "n_prompt_tokens": true_tokens, "n_ctx": n_ctx}}).to_string(),
        );
    }
    let stops: Vec<String> = match &body["stop"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    if cfg.reject_grammar
        && let Some(field) = ["grammar", "structured_outputs", "ebnf"]
            .into_iter()
            .find(|f| body.get(*f).is_some())
    {
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": format!("Unrecognized request argument supplied: {field}"), "type": "invalid_request_error", "param": field}}).to_string(),
        );
    }
    let last_role = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(|m| m["role"].clone());
    if cfg.reject_prefill && last_role.is_some_and(|r| r == "assistant") {
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": {"code": 400, "message": "Assistant response prefill is incompatible with enable_thinking.", "type": "invalid_request_error"}}).to_string(),
        );
    }
    if cfg.reject_stream && body["stream"].as_bool() == Some(true) {
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": "Streaming is not supported by this deployment: `stream` must be false.", "type": "invalid_request_error", "param": "stream"}}).to_string(),
        );
    }
    if cfg.stop_mode == StopMode::Reject && !stops.is_empty() {
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": "Unsupported parameter: 'stop' is not supported with this model.", "type": "invalid_request_error", "param": "stop", "code": "unsupported_parameter"}}).to_string(),
        );
    }

    let matched = cfg.by_content.iter().find_map(|(needle, reply)| {
        prompt_text(&body)
            .contains(needle.as_str())
            .then(|| reply.clone())
    });
    let turn = if matched.is_some() {
        usize::MAX // not a scripted turn: `turns` stays where it was
    } else if cfg.by_step {
        let prompt = if chat {
            body["messages"].as_array().map(|m| {
                m.iter()
                    .filter_map(|m| m["content"].as_str())
                    .collect::<String>()
            })
        } else {
            body["prompt"].as_str().map(str::to_owned)
        };
        // Observations after the task (the system prompt's examples mention the tags too).
        let prompt = prompt.unwrap_or_default();
        let after_task = prompt
            .rfind("</question>")
            .map_or(&prompt[..], |i| &prompt[i..]);
        after_task.matches("<observation>").count()
    } else {
        inner.next_turn.fetch_add(1, Ordering::SeqCst)
    };
    let text = matched.unwrap_or_else(|| {
        cfg.turns
            .get(turn)
            .cloned()
            .unwrap_or_else(|| cfg.default_reply.clone())
    });
    let (mut content, mut finish, fired) = apply_stops(&text, &stops, cfg.stop_mode);
    if let Some(max) = max_tokens.filter(|_| !cfg.ignore_max_tokens) {
        let limit = (max as usize).saturating_mul(4);
        if content.len() > limit {
            let mut end = limit;
            while !content.is_char_boundary(end) {
                end -= 1;
            }
            content.truncate(end);
            finish = "length";
        }
    }
    let prompt_tokens = if cfg.enforce_window {
        true_tokens
    } else {
        (body["messages"].to_string().len() + body["prompt"].as_str().map_or(0, str::len)) as u64
            / 4
    };
    let usage = json!({"prompt_tokens": prompt_tokens, "completion_tokens": content.len() as u64 / 4 + 1, "total_tokens": prompt_tokens + content.len() as u64 / 4 + 1});
    let stop_reason = if cfg.stop_reason {
        fired.map(Value::String).unwrap_or(Value::Null)
    } else {
        Value::Null
    };

    let stream = body["stream"].as_bool().unwrap_or(false);
    if !stream {
        tokio::time::sleep(cfg.first_byte_delay).await;
        if cfg.malformed_json {
            return json_response(
                StatusCode::OK,
                "{\"choices\": [{\"message\": {\"content\": \"half".to_owned(),
            );
        }
        let mut choice = if chat {
            let mut m = json!({"role": "assistant", "content": content});
            if let Some(r) = &cfg.reasoning {
                m["reasoning_content"] = Value::String(r.clone());
            }
            json!({"index": 0, "message": m, "finish_reason": finish})
        } else {
            json!({"index": 0, "text": content, "finish_reason": finish})
        };
        if cfg.stop_reason {
            choice["stop_reason"] = stop_reason;
        }
        let choices = if cfg.empty_choices {
            json!([])
        } else {
            json!([choice])
        };
        let mut out = json!({"choices": choices, "usage": usage});
        add_ids(&mut out, cfg, chat, &model);
        let mut response = json_response(StatusCode::OK, out.to_string());
        if cfg.close_after_answer {
            response.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        return response;
    }

    // Streaming: build the whole SSE text, then write it in small byte chunks.
    let empty_fr = if cfg.empty_finish_reason {
        Value::String(String::new())
    } else {
        Value::Null
    };
    let mut events: Vec<String> = Vec::new();
    let event = |choice: Value| -> String {
        let mut e = json!({"choices": [choice]});
        add_ids(&mut e, cfg, chat, &model);
        format!("data: {e}\n\n")
    };
    if !cfg.empty_choices {
        if chat {
            events.push(event(json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": empty_fr})));
        }
        if let Some(r) = &cfg.reasoning {
            for piece in pieces(r, cfg.token_chars) {
                events.push(event(json!({"index": 0, "delta": {"reasoning_content": piece}, "finish_reason": empty_fr})));
            }
        }
        let mut content_events = 0;
        for (i, piece) in pieces(&content, cfg.token_chars).into_iter().enumerate() {
            if cfg.malformed_json && i == 1 {
                events.push("data: {\"choices\":[{\"delta\":{\"content\":\"x\n\n".to_owned());
                continue;
            }
            let choice = if chat {
                json!({"index": 0, "delta": {"content": piece}, "finish_reason": empty_fr})
            } else {
                json!({"index": 0, "text": piece, "finish_reason": empty_fr})
            };
            events.push(event(choice));
            content_events += 1;
            if cfg.cut_after_events == Some(content_events) {
                events.push(CUT.to_owned());
                break;
            }
        }
        let mut last = if chat {
            json!({"index": 0, "delta": {}, "finish_reason": finish})
        } else {
            json!({"index": 0, "text": "", "finish_reason": finish})
        };
        if cfg.stop_reason {
            last["stop_reason"] = stop_reason;
        }
        events.push(event(last));
    }
    if body["stream_options"]["include_usage"].as_bool() == Some(true) || cfg.empty_choices {
        let mut e = json!({"choices": [], "usage": usage});
        add_ids(&mut e, cfg, chat, &model);
        events.push(format!("data: {e}\n\n"));
    }
    events.push("data: [DONE]\n\n".to_owned());

    let mut parts: Vec<Result<Bytes, std::io::Error>> = Vec::new();
    let mut all: Vec<u8> = Vec::new();
    let mut cut = false;
    for e in events {
        if e == CUT {
            cut = true;
            break;
        }
        all.extend_from_slice(e.as_bytes());
    }
    for piece in all.chunks(cfg.chunk_bytes.max(1)) {
        parts.push(Ok(Bytes::copy_from_slice(piece)));
    }
    if cut {
        parts.push(Err(std::io::Error::other("fake server: stream cut")));
    }
    let guard = StreamGuard {
        inner: inner.clone(),
        done: false,
    };
    let first_delay = cfg.first_byte_delay;
    let chunk_delay = cfg.chunk_delay;
    let done_delay = cfg.done_delay;
    let body_stream = async_stream::stream! {
        let mut guard = guard;
        tokio::time::sleep(first_delay).await;
        let n = parts.len();
        for (i, p) in parts.into_iter().enumerate() {
            if i > 0 && !chunk_delay.is_zero() {
                tokio::time::sleep(chunk_delay).await;
            }
            let is_err = p.is_err();
            if i + 1 == n && !is_err {
                guard.done = true;
            }
            yield p;
            if is_err {
                guard.done = true;
                return;
            }
        }
        if !done_delay.is_zero() {
            tokio::time::sleep(done_delay).await;
        }
    };
    let mut response = Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache");
    if cfg.close_after_answer {
        response = response.header("connection", "close");
    }
    response
        .body(Body::from_stream(body_stream))
        .unwrap_or_default()
}

pub(super) const CUT: &str = "\u{0}CUT";

/// `bytes` bytes of `x` with this status, written in 64 KiB pieces as the client reads them.
pub(super) fn huge_body(inner: &Arc<Inner>, status: u16, bytes: usize) -> Response {
    static PIECE: [u8; 64 * 1024] = [b'x'; 64 * 1024];
    let guard = StreamGuard {
        inner: inner.clone(),
        done: false,
    };
    let body_stream = async_stream::stream! {
        let mut guard = guard;
        let mut left = bytes;
        while left > 0 {
            let n = left.min(PIECE.len());
            left -= n;
            yield Ok::<_, std::io::Error>(Bytes::from_static(&PIECE[..n]));
        }
        guard.done = true;
    };
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::OK))
        .header("content-type", "application/json")
        .body(Body::from_stream(body_stream))
        .unwrap_or_default()
}

/// Counts streams the client dropped before the end.
pub(super) struct StreamGuard {
    inner: Arc<Inner>,
    done: bool,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if self.done {
            self.inner.completed.fetch_add(1, Ordering::SeqCst);
        } else {
            self.inner.aborted.fetch_add(1, Ordering::SeqCst);
        }
    }
}

pub(super) fn add_ids(v: &mut Value, cfg: &FakeConfig, chat: bool, model: &str) {
    if cfg.missing_ids {
        return;
    }
    v["id"] = json!("cmpl-fake-1");
    v["object"] = json!(if chat {
        "chat.completion.chunk"
    } else {
        "text_completion"
    });
    v["created"] = json!(1_700_000_000u32);
    v["model"] = json!(model);
}

/// The text of a request's prompt: every message's content (a string, or the `text` of each
/// part), or the completions `prompt`, joined by newlines.
pub(super) fn prompt_text(body: &Value) -> String {
    let mut out = String::new();
    if let Some(prompt) = body["prompt"].as_str() {
        out.push_str(prompt);
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        match &message["content"] {
            Value::String(s) => out.push_str(s),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .for_each(|t| out.push_str(t)),
            _ => {}
        }
        out.push('\n');
    }
    out
}

/// Split text into pieces of `n` characters.
pub(super) fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}

/// The text a server sends for a turn, its finish reason, and the stop that fired.
pub(super) fn apply_stops(
    text: &str,
    stops: &[String],
    mode: StopMode,
) -> (String, &'static str, Option<String>) {
    let first = stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()).map(|p| (p + s.len(), p, s)))
        .min();
    match (first, mode) {
        (None, _) | (_, StopMode::Ignore) => (text.to_owned(), "stop", None),
        (Some((_, p, s)), StopMode::Strip | StopMode::Reject) => {
            (text[..p].to_owned(), "stop", Some(s.clone()))
        }
        (Some((end, _, s)), StopMode::Keep) => (text[..end].to_owned(), "stop", Some(s.clone())),
        (Some((_, p, s)), StopMode::FlushPartial) => {
            let mut half = s.len() / 2;
            while !s.is_char_boundary(half) {
                half -= 1;
            }
            (
                format!("{}{}", &text[..p], &s[..half.max(1)]),
                "stop",
                Some(s.clone()),
            )
        }
    }
}
