//! Serve's choice among the tools (`src/serve/choice.rs`): a request that asks for the first
//! token's alternatives (`top_logprobs`) and whose last message ends in the choice's ask is
//! answered apart from the scripted turns (none is used, and it is not in `requests()` but in
//! `choices()`), with the alternatives [`FakeChoice`] gives, as llama.cpp sends them.

use super::*;

/// The end of the choice's ask (`src/policy/choice_odds.rs`'s `ASK`).
const ASK_END: &str = "or with none if no tool fits.";

/// How the fake answers a choice request.
#[derive(Debug, Clone, Default)]
pub struct FakeChoice {
    /// The first token's alternatives and their log-probabilities, most likely first (empty:
    /// an answer without `logprobs`, as a server that does not send them).
    pub top: Vec<(String, f64)>,
}

/// Whether `body` is a choice request.
pub(super) fn is_choice(body: &Value) -> bool {
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    body.get("top_logprobs").is_some() && last.ends_with(ASK_END)
}

/// The answer to a choice request, kept in `choices`.
pub(super) fn answer(inner: &Inner, body: Value) -> Response {
    let stream = body["stream"].as_bool() == Some(true);
    if let Ok(mut kept) = inner.choices.lock() {
        kept.push(body);
    }
    let top = &inner.cfg.choice.top;
    let text = top.first().map(|(t, _)| t.clone()).unwrap_or_default();
    let logprobs = (!top.is_empty()).then(|| {
        let alternatives: Vec<Value> = top
            .iter()
            .map(|(t, lp)| json!({"token": t, "logprob": lp}))
            .collect();
        json!({"content": [{"token": text, "logprob": top[0].1, "top_logprobs": alternatives}]})
    });
    if stream {
        let mut piece = json!({"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": null});
        if let Some(lp) = &logprobs {
            piece["logprobs"] = lp.clone();
        }
        let done = json!({"index": 0, "delta": {}, "finish_reason": "length"});
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
    let mut choice = json!({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"});
    if let Some(lp) = logprobs {
        choice["logprobs"] = lp;
    }
    json_response(
        StatusCode::OK,
        json!({"object": "chat.completion", "choices": [choice]}).to_string(),
    )
}
