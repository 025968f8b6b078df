//! The first token's alternatives, read from the `logprobs` a server sends with a choice when
//! asked (`TurnRequest::first_token_odds`).
//!
//! OpenAI's chat shape is `{"content": [{"token", "logprob", "top_logprobs": [{"token",
//! "logprob"}, …]}, …]}`, one entry per generated token; llama-server sends the same, in the
//! first chunk when streaming. Read leniently: anything else (`null`, a completions shape, an
//! entry without a number) reads as no alternatives, never as a failed turn.

use serde_json::Value;

use crate::llm::{MAX_FIRST_TOKEN_ODDS, TokenOdds};

/// The alternatives of the first token in `logprobs`, most likely first, at most
/// [`MAX_FIRST_TOKEN_ODDS`]; empty when the value holds none in OpenAI's chat shape.
pub(super) fn first_token(logprobs: &Value) -> Vec<TokenOdds> {
    let Some(first) = logprobs
        .get("content")
        .and_then(Value::as_array)
        .and_then(|tokens| tokens.first())
    else {
        return Vec::new();
    };
    let read = |entry: &Value| {
        Some(TokenOdds {
            token: entry.get("token")?.as_str()?.to_owned(),
            logprob: entry.get("logprob")?.as_f64()?,
        })
    };
    let mut odds: Vec<TokenOdds> = match first.get("top_logprobs").and_then(Value::as_array) {
        Some(top) if !top.is_empty() => top.iter().filter_map(read).collect(),
        _ => read(first).into_iter().collect(),
    };
    odds.sort_by(|a, b| b.logprob.total_cmp(&a.logprob));
    odds.truncate(usize::from(MAX_FIRST_TOKEN_ODDS));
    odds
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pairs(odds: &[TokenOdds]) -> Vec<(&str, f64)> {
        odds.iter().map(|o| (o.token.as_str(), o.logprob)).collect()
    }

    #[test]
    fn the_first_tokens_alternatives_most_likely_first() {
        let sent = json!({"content": [
            {"token": "get", "logprob": -0.4, "top_logprobs": [
                {"token": "none", "logprob": -2.4}, {"token": "get", "logprob": -0.4},
                {"token": "<", "logprob": "not a number"}]},
            {"token": "_", "logprob": -0.1, "top_logprobs": [{"token": "_", "logprob": -0.1}]}
        ]});
        assert_eq!(pairs(&first_token(&sent)), [("get", -0.4), ("none", -2.4)]);
        // Without alternatives, the sampled token alone.
        let sent = json!({"content": [{"token": "none", "logprob": -0.2}]});
        assert_eq!(pairs(&first_token(&sent)), [("none", -0.2)]);
    }

    #[test]
    fn anything_else_is_no_alternatives() {
        for sent in [
            json!(null),
            json!({"content": null}),
            json!({"content": []}),
            json!({"tokens": ["a"], "token_logprobs": [-0.1]}),
            json!("logprobs"),
        ] {
            assert!(first_token(&sent).is_empty(), "{sent}");
        }
    }

    #[test]
    fn at_most_the_limit_is_kept() {
        let top: Vec<Value> = (0..40)
            .map(|i| json!({"token": format!("t{i}"), "logprob": -f64::from(i)}))
            .collect();
        let sent = json!({"content": [{"token": "t0", "logprob": 0.0, "top_logprobs": top}]});
        let odds = first_token(&sent);
        assert_eq!(odds.len(), usize::from(MAX_FIRST_TOKEN_ODDS));
        assert_eq!(odds[0].token, "t0");
    }
}
