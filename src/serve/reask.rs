//! Choose's re-ask (`crate::policy::choose` decides when): the request just answered, asked
//! once more for one call of the better tool only, under that call's grammar; the new call is
//! read as any turn is.

use super::grammar;
use super::read::{Read, read};
use super::request::Ask;
use super::thought::ThoughtMode;
use crate::agent::Role;
use crate::agent::history::History;
use crate::llm::{Api, Model, TurnRequest, Usage};
use crate::policy::{Better, Decision, Policies};
use crate::protocol::STOP_SEQUENCES;
use crate::shown::Outside;

/// What the re-ask gave.
pub(crate) enum Reasked {
    /// A usable call of the better tool: the turn's text, its reading, and the server's own
    /// reasoning.
    Call(String, Read, Option<String>),
    /// A turn that is no usable call of the better tool (the first call stands): its text, and
    /// why it is not.
    Unusable(String, String),
    /// No turn: no grammar of the tool could be built (nothing was asked), or the request
    /// failed.
    Nothing,
}

/// Ask `asked` (the request just answered, its prompt fitted) once more for one call of
/// `better`'s tool only, under that call's grammar. The request is counted in `requests` when
/// it is made, and its usage added to `usage` when it is answered.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn reask(
    model: &dyn Model,
    (api, thought, policies): (Api, ThoughtMode, Policies),
    history: &History,
    asked: &TurnRequest,
    ask: &Ask,
    role: &Role,
    better: &Better<'_>,
    requests: &mut u32,
    usage: &mut Usage,
) -> Reasked {
    let Some(grammar) = grammar::one_call_of(ask, api, thought, &better.tool.name) else {
        return Reasked::Nothing;
    };
    let request = TurnRequest {
        grammar: Some(grammar),
        stop: STOP_SEQUENCES.iter().map(|s| s.to_string()).collect(),
        end_at_repeated_block: None,
        ..asked.clone()
    };
    *requests += 1;
    let result = match model.turn(&request, &mut |_| {}).await {
        Ok(result) => result,
        Err(e) => {
            tracing::warn!(error = %Outside(&e), "the re-ask for the better tool failed; the first call stands");
            return Reasked::Nothing;
        }
    };
    usage.add(result.usage);
    let text = history.turn_text(&result.text);
    let tool = &better.tool.name;
    match read(&text, &result.finish, ask, role, false, thought, policies) {
        Ok(r) if matches!(&r.decision, Decision::Calls(c) if c.iter().all(|(n, _)| n == tool)) => {
            Reasked::Call(text, r, result.reasoning)
        }
        Ok(r) => {
            let wrote = match &r.decision {
                Decision::Calls(_) => "a call of another tool",
                Decision::Answer { .. } => "a text answer",
            };
            Reasked::Unusable(text, format!("it gave {wrote}, not a call of {tool}"))
        }
        Err(refusal) => {
            tracing::debug!(reason = %Outside(&refusal.message), "the re-ask for the better tool gave no usable call; the first call stands");
            Reasked::Unusable(
                text,
                format!("it gave no usable call of {tool}: {}", refusal.message),
            )
        }
    }
}
