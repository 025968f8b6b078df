//! What can fail while an agent or a run is set up (a run itself ends in an outcome).

use serde_json::Value;

use super::outcome::Outcome;
use super::role::RoleError;
use crate::prompt::PromptError;

/// Errors while setting up an agent or a run (a run itself ends in an [`Outcome`], whatever happens).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// A prompt template could not be read, parsed or rendered (see [`PromptError`]; the message
    /// names the template or its file).
    #[error(transparent)]
    Prompt(#[from] PromptError),
    /// A role could not be built: its file did not read or parse, or its output schema is not a
    /// valid JSON Schema (see [`RoleError`]).
    #[error(transparent)]
    Role(#[from] RoleError),
    /// The accepted final answer does not deserialize into the requested Rust type.
    #[error("the final answer does not fit the requested type: {error}")]
    Decode {
        /// The outcome with the JSON value, so the caller still has the answer.
        outcome: Box<Outcome<Value>>,
        /// Why serde refused the value.
        #[source]
        error: serde_json::Error,
    },
}
