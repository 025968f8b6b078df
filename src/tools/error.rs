//! Why a tool call failed.

use std::time::Duration;

/// Why a tool call failed. The message becomes the observation the model sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The tool ran and failed; the agent shows the text to the model as `Error from <tool>: …`
    /// and the run goes on.
    #[error("{0}")]
    Failed(String),
    /// The call was refused before it ran (a path outside the workspace, a write that is not allowed, ...).
    #[error("refused: {0}")]
    Refused(String),
    /// The tool gave up waiting under its own limit (an MCP call); the agent's tool timeout
    /// around every call is separate and does not produce this.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
}
