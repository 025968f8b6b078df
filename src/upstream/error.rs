//! What can go wrong asking the server something beside a turn. The model client turns each into
//! its own error (and redacts the key from it): nothing here is shown as it is.

use super::http::Fault;

/// A failed probe, token count or model list.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UpstreamError {
    /// The request failed, the server answered with an error, or its answer went past its cap.
    #[error(transparent)]
    Fault(#[from] Fault),
    /// The answer is not what the endpoint gives (not JSON, a list missing).
    #[error("{0}")]
    Unexpected(String),
    /// The answer is JSON, but not of the expected shape.
    #[error("{reason}")]
    Malformed {
        /// What is wrong with it.
        reason: String,
        /// The start of the answer.
        snippet: String,
    },
}

impl UpstreamError {
    /// The HTTP status of an error answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            UpstreamError::Fault(Fault::Status(failure)) => Some(failure.status),
            _ => None,
        }
    }
}
