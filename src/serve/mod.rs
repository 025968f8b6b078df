//! `tagloop serve`: an OpenAI-compatible endpoint that answers `tools` with `tool_calls` for any
//! model, by speaking tagloop's text protocol to the upstream server.

mod chunks;
mod error;
mod event;
mod upstream;

pub use error::ServeError;
pub use event::{FinishReason, ServeEvent, ToolCallOut};

/// The endpoint's parts that its integration tests drive on their own (the streamed chunks on a
/// test's router, the pass-through in front of a fake upstream). Not part of the API: they may
/// change with any release.
#[doc(hidden)]
pub mod testing {
    pub use super::chunks::{ChunkMeta, sse_response};
    pub use super::upstream::{Upstream, UpstreamLimits};
}
