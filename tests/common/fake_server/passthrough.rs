//! The routes an application sends to its one base URL beside its chat, which `tagloop serve`
//! passes through: `POST /v1/embeddings`, `GET /v1/models/{id}`, `POST
//! /v1/audio/transcriptions` (a multipart upload, answered with its size), `POST /v1/echo` (the
//! body sent back byte for byte, with its content type), `GET /v1/stream?bytes=N&event=E&pace_ms=P`
//! (a streamed answer of N bytes of server-sent events of E bytes, P ms apart, made as it is read), `GET /v1/echo-key` (the
//! `Authorization` it got, sent back split across three pieces), `GET /v1/redirect` (a 307),
//! and `GET /health`. Each is kept in `passed()`, raw.

use super::*;

use axum::extract::{Path, Query, Request};
use axum::http::Method;
use base64::Engine;
use futures::StreamExt;

/// A request to one of these routes, as it arrived.
#[derive(Debug, Clone)]
pub struct PassedRequest {
    pub method: Method,
    /// The path and query (`/v1/models/x?y=1`).
    pub target: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// The routes, added to the fake's router.
pub(super) fn routes(router: Router<Arc<Inner>>) -> Router<Arc<Inner>> {
    router
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/models/{id}", get(model))
        .route("/v1/audio/transcriptions", post(transcription))
        .route("/v1/echo", post(echo))
        .route("/v1/stream", get(stream))
        .route("/v1/echo-key", get(echo_key))
        .route("/v1/redirect", get(redirect))
        .route("/health", get(health))
}

/// Read `request` whole and keep it in `passed()`; what was kept.
async fn keep(inner: &Inner, request: Request) -> PassedRequest {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 64 << 20)
        .await
        .unwrap_or_default();
    let uri = &parts.uri;
    let kept = PassedRequest {
        method: parts.method.clone(),
        target: uri
            .path_and_query()
            .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned()),
        headers: parts.headers,
        body,
    };
    if let Ok(mut passed) = inner.passed.lock() {
        passed.push(kept.clone());
    }
    kept
}

/// The fake's vector of a text: its length, its bytes' sum mod 97, 1.
pub fn fake_embedding(text: &str) -> [f32; 3] {
    let sum: u32 = text.bytes().map(u32::from).sum();
    [text.len() as f32, (sum % 97) as f32, 1.0]
}

async fn embeddings(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let body = keep(&inner, request).await.body;
    let Ok(asked) = serde_json::from_slice::<Value>(&body) else {
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": "not JSON"}}),
        );
    };
    let inputs: Vec<String> = match &asked["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .map(|v| v.as_str().unwrap_or("").to_owned())
            .collect(),
        _ => Vec::new(),
    };
    let base64 = asked["encoding_format"] == "base64";
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let v = fake_embedding(text);
            let embedding = if base64 {
                let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    json_response(
        StatusCode::OK,
        json!({"object": "list", "data": data, "model": asked["model"],
               "usage": {"prompt_tokens": inputs.len(), "total_tokens": inputs.len()}}),
    )
}

async fn model(
    State(inner): State<Arc<Inner>>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    keep(&inner, request).await;
    json_response(
        StatusCode::OK,
        json!({"id": id, "object": "model", "created": 1, "owned_by": "fake-upstream"}),
    )
}

async fn transcription(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let size = keep(&inner, request).await.body.len();
    json_response(
        StatusCode::OK,
        json!({"text": format!("received {size} bytes")}),
    )
}

async fn echo(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let kept = keep(&inner, request).await;
    let ct = kept.headers.get("content-type").cloned();
    let mut r = Response::new(Body::from(kept.body));
    if let Some(ct) = ct {
        r.headers_mut().insert("content-type", ct);
    }
    r
}

async fn stream(
    State(inner): State<Arc<Inner>>,
    Query(q): Query<std::collections::HashMap<String, u64>>,
    request: Request,
) -> Response {
    keep(&inner, request).await;
    let total = q.get("bytes").copied().unwrap_or(1 << 20);
    let size = q.get("event").copied().unwrap_or(64 << 10);
    let pace = Duration::from_millis(q.get("pace_ms").copied().unwrap_or(0));
    // One event of `event` bytes at a time (the last one shorter), made when the reader asks
    // for it, `pace_ms` after the one before.
    let event = |n: u64| {
        let payload = n.saturating_sub(8) as usize;
        Bytes::from(format!("data: {}\n\n", "x".repeat(payload)))
    };
    let pieces = futures::stream::unfold(total, move |left| async move {
        if left == 0 {
            return None;
        }
        if !pace.is_zero() {
            tokio::time::sleep(pace).await;
        }
        let n = left.min(size).max(9);
        let piece = event(n);
        let sent = piece.len() as u64;
        Some((Ok::<_, std::io::Error>(piece), left.saturating_sub(sent)))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(pieces))
        .expect("response")
}

async fn echo_key(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let auth = keep(&inner, request)
        .await
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let text = format!("data: you sent {auth} to me\n\n");
    // Cut inside the key, twice, each piece written out on its own.
    let cut = text.len() / 2;
    let parts = vec![
        text[..cut - 3].to_owned(),
        text[cut - 3..cut + 2].to_owned(),
        text[cut + 2..].to_owned(),
    ];
    let paced = futures::stream::iter(parts).then(|p| async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        Ok::<_, std::io::Error>(Bytes::from(p))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("x-echo-auth", auth)
        .body(Body::from_stream(paced))
        .expect("response")
}

async fn redirect(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    keep(&inner, request).await;
    Response::builder()
        .status(StatusCode::TEMPORARY_REDIRECT)
        .header("location", "http://127.0.0.1:9/v1/elsewhere")
        .body(Body::empty())
        .expect("response")
}

async fn health(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    keep(&inner, request).await;
    json_response(StatusCode::OK, json!({"status": "ok"}))
}

fn json_response(status: StatusCode, body: Value) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .expect("response")
}
