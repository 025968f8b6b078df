//! Errors of the model layer.

/// Everything that can go wrong while asking a model for a turn.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// A placeholder until the llm helper lands.
    #[error("{0}")]
    Other(String),
}
