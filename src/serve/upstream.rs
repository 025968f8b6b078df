//! The upstream for requests the core does not handle: pass-through and the model list.
// replaced by the chunks/upstream branch at merge

use axum::response::Response;

use super::ServeError;
use crate::secret::Secret;

/// The upstream server (placeholder: this branch answers a 500 to what it would forward).
pub(crate) struct Upstream {
    model: Option<String>,
}

impl Upstream {
    /// An upstream at `base_url`, asked with `api_key`.
    pub(crate) fn new(
        base_url: &str,
        api_key: Secret,
        model: Option<String>,
    ) -> Result<Upstream, ServeError> {
        let _ = (base_url, api_key);
        Ok(Upstream { model })
    }

    /// Forward a chat request without tools unchanged.
    pub(crate) async fn pass_through(&self, body: bytes::Bytes) -> Response {
        let _ = body;
        ServeError::Config("pass-through arrives with the upstream branch".into()).into_openai()
    }

    /// `GET /v1/models`.
    pub(crate) async fn models(&self) -> Response {
        let _ = &self.model;
        ServeError::Config("the model list arrives with the upstream branch".into()).into_openai()
    }
}
