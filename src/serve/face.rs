//! A face of the endpoint: how one API's requests are read into the shared request model
//! ([`Ask`]) and how the core's [`ServeEvent`]s are rendered back in that API's shape. The
//! OpenAI face (`/v1/chat/completions`) is here; the Anthropic one is `messages/`. Both go
//! through the same admission (key, body limit, slots, time limit), the same core and the same
//! log line (`http.rs`); a face is only its parsing and its rendering.

use std::sync::Arc;

use axum::response::Response;
use futures::stream::BoxStream;
use serde_json::Value;

use super::answer::answer;
use super::chunks::{ChunkMeta, sse_response};
use super::core::{Core, Trace};
use super::request::{Ask, wants_core};
use super::response::{AnswerMeta, completion};
use super::{ServeError, ServeEvent, plain};
use crate::llm::Api;

/// One API the endpoint speaks: its route, how it reads a request, how it says an error.
pub(crate) struct Face {
    /// The route, for the log line.
    pub path: &'static str,
    /// The request body (a JSON object) read into what the core needs; `Api` is the upstream's.
    pub read: fn(&Value, Api) -> Result<Reading, ServeError>,
    /// A failure as this API's error response.
    pub error: fn(ServeError) -> Response,
}

/// What a face made of a request.
pub(crate) enum Reading {
    /// Relayed to the upstream unchanged (an OpenAI chat request without tools).
    PassThrough,
    /// Answered: the shared request model, how it is answered, and the face's rendering.
    Answer {
        ask: Box<Ask>,
        mode: Mode,
        render: Arc<dyn Render>,
    },
}

/// How a request is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mode {
    /// By the core: the text protocol, the grammar, validation and repair (`answer.rs`).
    Core,
    /// As a plain chat on the upstream's chat API (a request without tools on a face that has
    /// no pass-through; `plain.rs`).
    Plain,
}

impl Mode {
    /// Answer `ask` this way; the events go to `emit` (see [`answer`]).
    pub(crate) async fn answer(
        &self,
        core: &Core<'_>,
        ask: &Ask,
        emit: &mut (dyn FnMut(ServeEvent) + Send),
        trace: &mut Trace,
    ) -> Result<(), ServeError> {
        match self {
            // The one place the format is chosen: the model's own where serve learnt it.
            Mode::Core => match &core.native {
                Some(native) => super::native::answer(core, native, ask, emit, trace).await,
                None => answer(core, ask, emit, trace).await,
            },
            Mode::Plain => plain::answer(core.model, ask, emit, trace).await,
        }
    }
}

/// A face's rendering of one request's answer.
pub(crate) trait Render: Send + Sync {
    /// The answer id's prefix (`chatcmpl-`, `msg_`).
    fn id_prefix(&self) -> &'static str;
    /// The whole answer made of `events` (also what a transcript keeps).
    fn whole(&self, meta: &AnswerMeta, events: &[ServeEvent]) -> Value;
    /// The streamed answer made of `events`, as they come.
    fn stream(&self, meta: AnswerMeta, events: BoxStream<'static, ServeEvent>) -> Response;
    /// Work to finish before a whole answer goes out (the Responses face stores it); none by
    /// default.
    fn settle(&self, _whole: &Value) -> Option<futures::future::BoxFuture<'static, ()>> {
        None
    }
}

/// The OpenAI face.
pub(crate) const OPENAI: Face = Face {
    path: "/v1/chat/completions",
    read: read_openai,
    error: ServeError::into_openai,
};

fn read_openai(body: &Value, _api: Api) -> Result<Reading, ServeError> {
    if !wants_core(body) {
        return Ok(Reading::PassThrough);
    }
    let ask = Ask::read(body)?;
    let render = Arc::new(OpenAiRender {
        include_usage: ask.include_usage,
    });
    Ok(Reading::Answer {
        ask: Box::new(ask),
        mode: Mode::Core,
        render,
    })
}

/// OpenAI's `chat.completion`, or its chunks.
struct OpenAiRender {
    include_usage: bool,
}

impl Render for OpenAiRender {
    fn id_prefix(&self) -> &'static str {
        "chatcmpl-"
    }

    fn whole(&self, meta: &AnswerMeta, events: &[ServeEvent]) -> Value {
        completion(meta, events)
    }

    fn stream(&self, meta: AnswerMeta, events: BoxStream<'static, ServeEvent>) -> Response {
        let meta = ChunkMeta {
            id: meta.id,
            model: meta.model,
            created: meta.created,
        };
        sse_response(meta, self.include_usage, events)
    }
}
