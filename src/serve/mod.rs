//! `tagloop serve`: an OpenAI-compatible endpoint that answers `tools` with `tool_calls` for any
//! model, by speaking tagloop's text protocol to the upstream server.

mod error;
mod event;

pub use error::ServeError;
pub use event::{FinishReason, ServeEvent, ToolCallOut};
