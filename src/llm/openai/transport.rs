//! The tower service under async-openai: one attempt per request, no retries of its own, and
//! a non-2xx answer read here (status, `Retry-After`, body) before async-openai can reduce it
//! to text.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;

use crate::text::clip_bytes;

/// A non-2xx HTTP answer, read by our transport before async-openai can lose its status.
#[derive(Debug)]
pub(super) struct HttpFailure {
    pub(super) status: u16,
    pub(super) retry_after: Option<Duration>,
    pub(super) body: String,
}

impl std::fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}: {}", self.status, clip_bytes(&self.body, 200))
    }
}

impl std::error::Error for HttpFailure {}

/// The tower service under async-openai: one attempt, no retries, status-preserving errors.
#[derive(Clone)]
pub(super) struct Transport {
    pub(super) http: reqwest::Client,
}

impl tower::Service<HttpRequestFactory> for Transport {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = Pin<Box<dyn Future<Output = Result<reqwest::Response, OpenAIError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> Self::Future {
        let http = self.http.clone();
        Box::pin(async move {
            let request = factory.build().await?;
            let response = http.execute(request).await?;
            if response.status().is_success() {
                return Ok(response);
            }
            Err(OpenAIError::Boxed(Box::new(read_failure(response).await)))
        })
    }
}

/// Read a non-2xx answer: its status, `Retry-After` (seconds) and body.
pub(super) async fn read_failure(response: reqwest::Response) -> HttpFailure {
    let status = response.status();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        // A value too large for a `Duration` (a server may send anything) is ignored.
        .and_then(|s| Duration::try_from_secs_f64(s).ok());
    let body = response.text().await.unwrap_or_default();
    HttpFailure {
        status: status.as_u16(),
        retry_after,
        body,
    }
}
