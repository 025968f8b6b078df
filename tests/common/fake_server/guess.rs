//! Serve's guess at a question's function (`src/serve/guess.rs`): a request whose prompt opens
//! with its instructions is answered apart from the scripted turns (none is used, and it is not
//! in `requests()` but in `guesses()`), as [`FakeGuess`] says.

use super::*;

/// The first line of the guess's prompt (`src/serve/guess.rs`'s `INSTRUCTIONS`).
const GUESS_INSTRUCTIONS: &str = "You name Python functions.";

/// How the fake answers a guess request.
#[derive(Debug, Clone, Default)]
pub struct FakeGuess {
    /// The guessed name (`None`: an empty answer).
    pub reply: Option<String>,
    /// Answer `400` instead (an upstream that fails the request).
    pub fail: bool,
    /// Sleep this long before answering.
    pub delay: Duration,
}

/// Whether `body` is a guess request.
pub(super) fn is_guess(body: &Value) -> bool {
    let first = body["messages"][0]["content"]
        .as_str()
        .or_else(|| body["prompt"].as_str())
        .unwrap_or_default();
    first.starts_with(GUESS_INSTRUCTIONS)
}

/// The answer to a guess request, kept in `guesses`.
pub(super) async fn answer(inner: &Inner, body: Value, chat: bool) -> Response {
    let cfg = &inner.cfg.guess;
    let stream = body["stream"].as_bool() == Some(true);
    if let Ok(mut kept) = inner.guesses.lock() {
        kept.push(body);
    }
    tokio::time::sleep(cfg.delay).await;
    if cfg.fail {
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": "the fake refuses the guess", "type": "invalid_request_error"}}).to_string(),
        );
    }
    let text = cfg.reply.clone().unwrap_or_default();
    let (piece, done) = if chat {
        (
            json!({"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": null}),
            json!({"index": 0, "delta": {}, "finish_reason": "stop"}),
        )
    } else {
        (
            json!({"index": 0, "text": text, "finish_reason": null}),
            json!({"index": 0, "text": "", "finish_reason": "stop"}),
        )
    };
    if stream {
        let events = format!(
            "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
            json!({"object": "chat.completion.chunk", "choices": [piece]}),
            json!({"object": "chat.completion.chunk", "choices": [done]})
        );
        return Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "text/event-stream")
            .body(Body::from(events))
            .unwrap_or_default();
    }
    let choice = if chat {
        json!({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"})
    } else {
        json!({"index": 0, "text": text, "finish_reason": "stop"})
    };
    json_response(
        StatusCode::OK,
        json!({"object": "chat.completion", "choices": [choice]}).to_string(),
    )
}
