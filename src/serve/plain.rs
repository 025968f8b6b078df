//! A request without tools on a face with no pass-through (Anthropic's `/v1/messages`): the
//! conversation rendered as plain chat messages for the upstream's chat API, the upstream's
//! text passed on as it streams. No text protocol, no grammar, no repair: there is nothing to
//! validate. The client's stop sequences are not sent upstream: a server that stops at one
//! strips it and says only `finish_reason: "stop"`, so which one fired (Anthropic's
//! `stop_sequence`), or whether any did, would be lost. The face cuts the text at them instead
//! (`messages/stops.rs`); the upstream then writes on to its own end or to `max_tokens`.

use super::ServeError;
use super::answer::client_reason;
use super::conversation::render_call;
use super::core::Trace;
use super::event::{FinishReason, ServeEvent};
use super::request::Ask;
use crate::llm::{Finish, Message, Model, Prompt, Role, TurnRequest};
use crate::policy::Entry;
use crate::shown::Outside;

/// The turn budget when the client sets none.
const DEFAULT_MAX_TOKENS: u32 = 1024;

/// The chat messages of `ask`: its instructions as the system message, then the conversation
/// (past calls and results, if any, written out as text).
pub(crate) fn prompt(ask: &Ask) -> Prompt {
    let mut messages = Vec::new();
    if !ask.instructions.trim().is_empty() {
        messages.push(Message::new(Role::System, ask.instructions.clone()));
    }
    for entry in &ask.conversation {
        let message = match entry {
            Entry::Question(q) => Message::new(Role::User, q.clone()),
            Entry::Answer { text, .. } => Message::new(Role::Assistant, text.clone()),
            Entry::Calls { calls, .. } => {
                let calls: Vec<String> = calls.iter().map(render_call).collect();
                Message::new(Role::Assistant, format!("I call {}.", calls.join(", ")))
            }
            Entry::Results(results) => {
                let body: Vec<String> = results
                    .iter()
                    .map(|(name, text)| format!("Result of {name}:\n{text}"))
                    .collect();
                Message::new(Role::User, body.join("\n\n"))
            }
        };
        messages.push(message);
    }
    Prompt::Chat(messages)
}

/// Answer `ask` as a plain chat: each delta of `model`'s text goes out as it comes (a plain
/// chat needs nothing else of the core: no template, grammar, repair or policy).
pub(crate) async fn answer(
    model: &dyn Model,
    ask: &Ask,
    emit: &mut (dyn FnMut(ServeEvent) + Send),
    trace: &mut Trace,
) -> Result<(), ServeError> {
    let request = TurnRequest {
        prompt: prompt(ask),
        temperature: ask.temperature,
        max_tokens: Some(ask.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
        seed: ask.seed,
        ..TurnRequest::default()
    };
    trace.requests += 1;
    let result = model
        .turn(&request, &mut |delta| {
            if !delta.is_empty() {
                emit(ServeEvent::Content(delta.to_string()));
            }
        })
        .await
        .map_err(|e| {
            tracing::warn!(error = %Outside(&e), "the upstream failed");
            ServeError::Upstream {
                reason: client_reason(&e),
            }
        })?;
    trace.usage.add(result.usage);
    trace.turns.push((result.text, None));
    if let Some(r) = result.reasoning.filter(|r| !r.trim().is_empty()) {
        emit(ServeEvent::Reasoning(r));
    }
    let finish_reason = match result.finish {
        Finish::Length | Finish::Repeated => FinishReason::Length,
        Finish::Stop(_) | Finish::End => FinishReason::Stop,
    };
    emit(ServeEvent::Done {
        finish_reason,
        usage: trace.usage,
    });
    Ok(())
}
