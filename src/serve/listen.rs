//! The endpoint on a TCP listener, with the bounds a hostile client needs and `axum::serve` has
//! no knob for: hyper's header-read timeout (which also closes a kept-alive connection left idle
//! between requests), and a cap on open connections below the process's open-file limit. A
//! connection past the cap waits in the listen queue until one closes, so that `accept` never
//! fails for want of descriptors; the first time the cap is hit (and at most every ten seconds
//! after) a log line says so. The body's time limit and the request slots are the router's
//! (`http.rs`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::{ServeConfig, ServeError};

/// Descriptors kept free beyond the connections and the upstream requests (the listener, the
/// runtime, transcripts, logs).
const SPARE_FILES: u64 = 64;
/// Least time between two log lines saying that the connection cap is reached.
const CAP_LOG_EVERY: Duration = Duration::from_secs(10);
/// Pause after `accept` fails (e.g. "Too many open files" from elsewhere in the process).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serve the endpoint for `config` on `listener` until `shutdown` resolves, then stop accepting
/// and let the requests in flight finish. Fails only as [`router`](super::router) does, before
/// accepting anything.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use tagloop::serve::{ServeConfig, serve};
///
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
/// serve(listener, ServeConfig::new("http://127.0.0.1:8080/v1"), std::future::pending()).await?;
/// # Ok(()) }
/// ```
pub async fn serve(
    listener: TcpListener,
    config: ServeConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let cap = connection_cap(&config);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_timeout);
    let app = super::router(config)?;
    let open = Arc::new(Semaphore::new(cap));
    let graceful = GracefulShutdown::new();
    let mut last_cap_log: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        if open.available_permits() == 0
            && last_cap_log.is_none_or(|t| t.elapsed() >= CAP_LOG_EVERY)
        {
            tracing::warn!(
                max_connections = cap,
                "the connection cap is reached: new connections wait until one closes"
            );
            last_cap_log = Some(Instant::now());
        }
        let place = tokio::select! {
            place = open.clone().acquire_owned() => place,
            () = &mut shutdown => break,
        };
        let Ok(place) = place else { break };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            let _place = place;
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "a connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// `max_connections`, lowered when the open-file limit leaves less room: each connection is a
/// descriptor, and each request in flight may hold one more to the upstream.
fn connection_cap(config: &ServeConfig) -> usize {
    let wanted = config.max_connections.max(1);
    let files = open_file_limit();
    let cap = cap_within(wanted, config.concurrency, files);
    if cap < wanted {
        tracing::warn!(
            max_connections = wanted,
            open_file_limit = files,
            cap,
            "the connection cap is lowered to fit the open-file limit"
        );
    }
    cap
}

/// `wanted` connections, or fewer to leave `concurrency` upstream connections and
/// [`SPARE_FILES`] free under an open-file limit of `files`; at least one.
fn cap_within(wanted: usize, concurrency: usize, files: Option<u64>) -> usize {
    let Some(files) = files else {
        return wanted;
    };
    let room = files
        .saturating_sub(concurrency as u64 + SPARE_FILES)
        .max(1);
    usize::try_from(room).map_or(wanted, |room| wanted.min(room))
}

/// The process's soft limit on open files, if it has one.
fn open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the one `rlimit` it is given, which lives on this stack.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (rc == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_stays_under_the_open_file_limit() {
        // The issue's 1,024 descriptors: 1,024 − 16 upstream − 64 spare.
        assert_eq!(cap_within(2000, 16, Some(1024)), 944);
        assert_eq!(cap_within(512, 16, Some(1024)), 512);
        assert_eq!(cap_within(512, 16, None), 512);
        assert_eq!(cap_within(512, 16, Some(50)), 1);
    }
}
