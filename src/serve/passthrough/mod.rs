//! The pass-through: every request serve does not answer itself goes to the upstream as it
//! came, so that an application's one base URL can point at serve for its embeddings, model
//! lookups and uploads as well as its chat (docs/serve.md, *Pass-through*).
//!
//! It is the router's fallback: serve's own routes (the faces, the model list, a tools-less
//! chat's plain relay in `upstream.rs`) match first, whatever routes are added beside them.
//! A request here goes through, in order:
//!
//! 1. **serve's key** (401, on every path, before the path is looked at: whether a route
//!    exists is not told to a client without the key);
//! 2. **the switch** (`--no-passthrough`: 404 for all that serve does not answer);
//! 3. **the route** (`route.rs`: under `/v1/`, or one of the upstream server's own routes; a
//!    path that could climb out of the base is refused);
//! 4. **the limits every face has** (`http::admit`: a `--concurrency` slot, 429; the body within
//!    `--max-body`, 413, and the body time limit, 408);
//! 5. **the upstream**, asked over the plain relay's HTTP client (`upstream.rs`: its
//!    connections, limits and redirect policy) with the client's method, path, query and body, the body's own
//!    headers (`headers.rs`), and the upstream key in place of serve's; within `--timeout`
//!    (504), never following a redirect (502: it would carry the upstream key away);
//! 6. **the answer**, streamed back as it comes (`stream.rs`), its status and headers (the
//!    hop-by-hop ones dropped), the upstream key taken out of headers and body alike.
//!
//! Each request gets one log line (`log.rs`) and no transcript.

mod headers;
mod log;
mod route;
mod stream;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use tokio::time::timeout_at;

use super::ServeError;
use super::http::{Shared, admit, authorised, not_found};
use super::upstream::UpstreamLimits;
use crate::shown::Outside;
use log::Logged;
use route::Refusal;

/// The longest a passed-through request may take, whatever `--timeout` says (the other
/// relays' limit).
fn total() -> Duration {
    UpstreamLimits::default().total
}

/// The router's fallback: a request serve does not answer, passed through or refused.
pub(crate) async fn fallback(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let started = Instant::now();
    let logged = Logged::new(request.method().as_str(), request.uri().path(), started);
    let deadline = tokio::time::Instant::now() + shared.cfg.timeout.min(total());
    let redactor = shared.upstream.redactor();
    match ask_upstream(&shared, request, deadline).await {
        Ok((answer, slot)) => {
            let mut logged = logged;
            logged.status = answer.status().as_u16();
            let mut response = Response::new(Body::empty());
            *response.status_mut() = answer.status();
            *response.headers_mut() = headers::to_client(answer.headers(), redactor);
            *response.body_mut() = stream::relay(answer, deadline, redactor, slot, logged);
            response
        }
        Err(refused) => {
            logged.answered(refused.status().as_u16());
            refused
        }
    }
}

/// The method-not-allowed answer of serve's own routes: 401 first without the key, as
/// everywhere, then 405 (a route serve answers is never passed through, whatever the method).
pub(crate) async fn wrong_method(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let logged = Logged::new(
        request.method().as_str(),
        request.uri().path(),
        Instant::now(),
    );
    let response = if authorised(&shared, request.headers()) {
        refusal(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "{} is not answered at {}",
                request.method(),
                request.uri().path()
            ),
        )
    } else {
        ServeError::Unauthorized.into_openai()
    };
    logged.answered(response.status().as_u16());
    response
}

/// Steps 1 to 5 of the module docs: the upstream's answer (its head; the body still to come)
/// with the request's slot, or serve's refusal.
async fn ask_upstream(
    shared: &Arc<Shared>,
    request: Request,
    deadline: tokio::time::Instant,
) -> Result<(reqwest::Response, tokio::sync::OwnedSemaphorePermit), Response> {
    let (http, base, auth) = shared.upstream.parts();
    let enabled = shared.cfg.passthrough;
    if !authorised(shared, request.headers()) {
        return Err(ServeError::Unauthorized.into_openai());
    }
    let (parts, body) = request.into_parts();
    let (method, uri) = (&parts.method, &parts.uri);
    let url = if enabled {
        route::upstream_url(base, method, uri.path(), uri.query())
    } else {
        Err(Refusal::NoRoute)
    };
    let url = match url {
        Ok(url) => url,
        // serve's own answer to a route it does not know, as before the pass-through.
        Err(Refusal::NoRoute) if enabled => {
            return Err(not_found(method.clone(), uri.clone()).await);
        }
        Err(why) => return Err(refused(why, method, uri.path())),
    };
    let (bytes, slot) = admit(shared, &parts.headers, body)
        .await
        .map_err(ServeError::into_openai)?;
    let mut asked = http
        .request(method.clone(), url)
        .headers(headers::to_upstream(&parts.headers))
        .body(bytes);
    if let Some(auth) = auth {
        asked = asked.header(header::AUTHORIZATION, auth.clone());
    }
    let answer = match timeout_at(deadline, asked.send()).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => return Err(unreachable(&e)),
        Err(_) => return Err(gateway(504, "the upstream server did not answer in time")),
    };
    let status = answer.status();
    if status.is_redirection() && status != StatusCode::NOT_MODIFIED {
        let to = answer
            .headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        tracing::warn!(status = status.as_u16(), location = %Outside(shared.upstream.redactor().redact(to)), "a passed-through request was answered with a redirect, not followed");
        return Err(gateway(
            502,
            &format!(
                "the upstream answered HTTP {} (a redirect), which serve does not follow",
                status.as_u16()
            ),
        ));
    }
    Ok((answer, slot))
}

/// The answer to a request that is not passed through.
fn refused(why: Refusal, method: &axum::http::Method, path: &str) -> Response {
    match why {
        Refusal::NoRoute => refusal(
            StatusCode::NOT_FOUND,
            format!("no route for {method} {path} (this server passes nothing through)"),
        ),
        Refusal::DotSegment => refusal(
            StatusCode::BAD_REQUEST,
            "a path with a `.` or `..` segment, or an encoded `/` or `\\`, is not passed through"
                .into(),
        ),
        Refusal::Method => refusal(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{method} is not passed through"),
        ),
    }
}

/// OpenAI's error object with `status`.
fn refusal(status: StatusCode, message: String) -> Response {
    let mut response = ServeError::BadRequest {
        message,
        param: None,
    }
    .into_openai();
    *response.status_mut() = status;
    response
}

/// A request that failed below HTTP: 504 for a time limit, 502 else; the cause in the log only.
fn unreachable(e: &reqwest::Error) -> Response {
    tracing::warn!(error = %Outside(e), "a passed-through request could not reach the upstream");
    if e.is_timeout() {
        gateway(504, "the upstream server did not answer in time")
    } else {
        gateway(502, "the upstream server could not be reached")
    }
}

fn gateway(status: u16, message: &str) -> Response {
    ServeError::Relay {
        status,
        message: message.to_owned(),
    }
    .into_openai()
}
