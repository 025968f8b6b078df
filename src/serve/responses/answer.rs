//! This face's [`Render`]: the whole answer as the Response object (`resource.rs`), or streamed
//! as the Responses events (`stream.rs`); the kept response saved through `render.rs`'s
//! [`Saver`](super::render::Saver) once the answer is settled.

use axum::response::Response;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde_json::Value;

use super::output::Output;
use super::render::ResponsesRender;
use super::resource::{Status, resource};
use super::stream::{BROKEN_OFF, sse};
use crate::serve::ServeEvent;
use crate::serve::face::Render;
use crate::serve::response::AnswerMeta;

impl Render for ResponsesRender {
    fn id_prefix(&self) -> &'static str {
        "resp_"
    }

    fn whole(&self, meta: &AnswerMeta, events: &[ServeEvent]) -> Value {
        let mut output = Output::new(self.names.clone());
        let mut ignored = Vec::new();
        for e in events {
            output.take(e.clone(), &mut ignored);
        }
        output.finish(&mut ignored);
        let end = output.end();
        let status = Status::of(end);
        let error = (status == Status::Failed).then_some(BROKEN_OFF);
        resource(&self.about(meta), output.items(), status, end, error)
    }

    fn stream(&self, meta: AnswerMeta, events: BoxStream<'static, ServeEvent>) -> Response {
        sse(self, meta, events)
    }

    fn settle(&self, whole: &Value) -> Option<BoxFuture<'static, ()>> {
        let saver = self.saver.clone()?;
        let whole = whole.clone();
        Some(Box::pin(async move { saver.save(&whole).await }))
    }
}
