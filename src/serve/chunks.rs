//! Streamed answers in OpenAI's chunk shape.
// replaced by the chunks/upstream branch at merge

use axum::response::Response;

use super::ServeError;
use super::event::ServeEvent;

/// What identifies an answer in each of its chunks.
pub(crate) struct ChunkMeta {
    pub id: String,
    pub model: String,
    pub created: u64,
}

/// The events as server-sent chunks (placeholder: this branch answers a 500).
pub(crate) fn sse_response(
    meta: ChunkMeta,
    include_usage: bool,
    events: impl futures::Stream<Item = ServeEvent> + Send + 'static,
) -> Response {
    let _ = (meta.id, meta.model, meta.created, include_usage, events);
    ServeError::Config("streamed answers arrive with the chunks branch".into()).into_openai()
}
