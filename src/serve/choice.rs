//! The choice's request (`policy/choice_odds.rs`): the turn's own prompt with the question
//! followed by the ask, one token, the first token's alternatives asked for. Sent beside the
//! first turn by `ahead.rs`; its answer read into the policy's margin here.

use super::ServeError;
use crate::llm::{Message, Model, Prompt, Role, TurnRequest, Usage};
use crate::policy::choice_odds::{ASK, TOP, margin};
use crate::shown::Outside;

/// What asking for the choice gave.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Chosen {
    /// The margin read (`None`: the answer held no alternatives to read).
    Read(Option<f64>),
    /// The request failed: the call is kept unchecked.
    Failed,
    /// The request's own time limit ran out during it (in seconds): the request is over.
    OutOfTime(u64),
}

/// The choice's request for a turn request whose prompt ends in the user's question; `None`
/// for any other prompt (completions' text, a conversation that ends elsewhere).
pub(crate) fn request(turn: &TurnRequest) -> Option<TurnRequest> {
    let Prompt::Chat(messages) = &turn.prompt else {
        return None;
    };
    let (last, before) = messages.split_last()?;
    if last.role != Role::User {
        return None;
    }
    let mut messages: Vec<Message> = before.to_vec();
    messages.push(Message::new(Role::User, format!("{}{ASK}", last.content)));
    Some(TurnRequest {
        prompt: Prompt::Chat(messages),
        temperature: Some(0.0),
        max_tokens: Some(1),
        keep_repetitions: true,
        first_token_odds: Some(TOP),
        ..TurnRequest::default()
    })
}

/// Ask `model` the choice `request` for the declared tools `names`: what it gave, and its usage.
pub(crate) async fn ask(
    model: &dyn Model,
    request: TurnRequest,
    names: Vec<String>,
) -> (Chosen, Usage) {
    let mut ignore = |_: &str| {};
    match model.turn(&request, &mut ignore).await {
        Ok(result) => {
            let alternatives: Vec<(&str, f64)> = result
                .first_token_odds
                .iter()
                .map(|o| (o.token.as_str(), o.logprob))
                .collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let read = margin(&alternatives, &names);
            if read.is_none() {
                tracing::debug!(
                    "the choice's answer held no odds (a server that sends no logprobs)"
                );
            }
            (Chosen::Read(read), result.usage)
        }
        Err(e) => {
            if let Some(ServeError::Timeout { secs }) = ServeError::out_of_time(&e) {
                tracing::warn!(secs, "the request's time ran out during the choice");
                return (Chosen::OutOfTime(secs), Usage::default());
            }
            tracing::warn!(error = %Outside(&e), "the choice's request failed; a call is kept");
            (Chosen::Failed, Usage::default())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_turns_prompt_with_the_ask_after_the_question() {
        let turn = TurnRequest {
            prompt: Prompt::Chat(vec![
                Message::new(Role::System, "tools"),
                Message::new(Role::User, "<question>q</question>"),
            ]),
            max_tokens: Some(400),
            ..TurnRequest::default()
        };
        let asked = request(&turn).unwrap();
        let Prompt::Chat(messages) = &asked.prompt else {
            panic!("not chat")
        };
        assert_eq!(messages[0].content, "tools");
        assert_eq!(messages[1].content, format!("<question>q</question>{ASK}"));
        assert_eq!(
            (
                asked.max_tokens,
                asked.first_token_odds,
                asked.grammar.is_none()
            ),
            (Some(1), Some(TOP), true)
        );
        let text = TurnRequest {
            prompt: Prompt::Text("q".into()),
            ..TurnRequest::default()
        };
        assert!(request(&text).is_none());
        let after_assistant = TurnRequest {
            prompt: Prompt::Chat(vec![Message::new(Role::Assistant, "a")]),
            ..TurnRequest::default()
        };
        assert!(request(&after_assistant).is_none());
    }
}
