//! Which requests pass through, and where each goes: the upstream URL for a client's method,
//! path and query, or the reason it is refused.
//!
//! * **Under `/v1/`**: every path serve does not answer itself (the router matches serve's own
//!   routes first; this is its fallback), any of the usual methods. `/v1/REST` goes to
//!   `{base}/REST`: the upstream's base (`--upstream`) already holds its `/v1` (or whatever
//!   version path it serves the OpenAI API under).
//! * **The server's own routes beside `/v1`**, a short list of what llama.cpp and vLLM publish
//!   for clients (health, tokenizer, the published settings), where the base ends in `/v1`: the
//!   route is then on the base's parent (`http://host:8080/v1` → `http://host:8080/tokenize`).
//!   A base that does not end in `/v1` names no such parent, and these routes are refused.
//!   Routes that change the server or tell more than a client needs (llama.cpp's `/slots`,
//!   `/metrics`, `/lora-adapters`, a `POST /props`) are not on the list.
//! * **A path that could climb out of the base** (a `.` or `..` segment, written plainly or
//!   percent-encoded, an encoded `/` or `\`) is refused: the URL parser would resolve it, and
//!   `/v1/../slots` would reach a route the list keeps out.

use axum::http::Method;

/// The server's own routes passed through (method, path), llama.cpp's and vLLM's.
const ROOT_ROUTES: &[(&str, &str)] = &[
    ("GET", "/health"),
    ("GET", "/ping"),
    ("GET", "/version"),
    ("GET", "/props"),
    ("POST", "/tokenize"),
    ("POST", "/detokenize"),
    ("POST", "/apply-template"),
];

/// The methods passed through under `/v1/` (not `CONNECT`, `TRACE`, `OPTIONS`).
const METHODS: &[Method] = &[
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
];

/// Why a request is not passed through (the client gets 404, or 405 for a method).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not a route serve passes through (or a root route and a base without `/v1`).
    NoRoute,
    /// A path with a segment that would climb out of the base.
    DotSegment,
    /// A method not passed through.
    Method,
}

/// The upstream URL a request goes to: `base` is the normalised `--upstream` (no trailing
/// `/`), `path` and `query` the client's, as it sent them (percent-encoding kept).
pub(crate) fn upstream_url(
    base: &str,
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> Result<String, Refusal> {
    if has_dot_segment(path) {
        return Err(Refusal::DotSegment);
    }
    let target = if let Some(rest) = path.strip_prefix("/v1/").filter(|r| !r.is_empty()) {
        if !METHODS.contains(method) {
            return Err(Refusal::Method);
        }
        format!("{base}/{rest}")
    } else if ROOT_ROUTES
        .iter()
        .any(|&(m, p)| m == method.as_str() && p == path)
    {
        let parent = base.strip_suffix("/v1").ok_or(Refusal::NoRoute)?;
        format!("{parent}{path}")
    } else {
        return Err(Refusal::NoRoute);
    };
    Ok(match query {
        Some(q) => format!("{target}?{q}"),
        None => target,
    })
}

/// Whether a segment of `path` is `.` or `..` (plainly or percent-encoded), or holds an encoded
/// `/` or `\`, or a plain `\` (which some servers read as `/`).
fn has_dot_segment(path: &str) -> bool {
    path.split('/').any(|segment| {
        let lower = segment.to_ascii_lowercase();
        let decoded = lower.replace("%2e", ".");
        decoded == "."
            || decoded == ".."
            || lower.contains("%2f")
            || lower.contains("%5c")
            || lower.contains('\\')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "http://up:8080/v1";

    fn url(method: Method, path: &str, query: Option<&str>) -> Result<String, Refusal> {
        upstream_url(BASE, &method, path, query)
    }

    #[test]
    fn v1_paths_go_under_the_base_with_their_query() {
        assert_eq!(
            url(Method::POST, "/v1/embeddings", None).as_deref(),
            Ok("http://up:8080/v1/embeddings")
        );
        assert_eq!(
            url(Method::GET, "/v1/models/a%20b", Some("x=1&y=2")).as_deref(),
            Ok("http://up:8080/v1/models/a%20b?x=1&y=2")
        );
        assert_eq!(
            url(Method::DELETE, "/v1/files/f-1", None).as_deref(),
            Ok("http://up:8080/v1/files/f-1")
        );
        // Another version path in the base is kept: the client's `/v1/` stands for it.
        assert_eq!(
            upstream_url("https://h/api/openai/v1beta", &Method::POST, "/v1/x", None).as_deref(),
            Ok("https://h/api/openai/v1beta/x")
        );
    }

    #[test]
    fn root_routes_go_to_the_bases_parent_only_when_it_ends_in_v1() {
        assert_eq!(
            url(Method::POST, "/tokenize", None).as_deref(),
            Ok("http://up:8080/tokenize")
        );
        assert_eq!(
            url(Method::GET, "/health", None).as_deref(),
            Ok("http://up:8080/health")
        );
        let other = upstream_url("http://up:8080/api", &Method::GET, "/health", None);
        assert_eq!(other, Err(Refusal::NoRoute));
    }

    #[test]
    fn what_is_not_on_the_lists_is_refused() {
        for (m, p) in [
            (Method::GET, "/slots"),
            (Method::GET, "/metrics"),
            (Method::POST, "/props"),
            (Method::POST, "/lora-adapters"),
            (Method::GET, "/"),
            (Method::GET, "/v1/"),
            (Method::GET, "/v1"),
            (Method::GET, "/v2/models"),
        ] {
            assert_eq!(url(m.clone(), p, None), Err(Refusal::NoRoute), "{m} {p}");
        }
        assert_eq!(url(Method::TRACE, "/v1/x", None), Err(Refusal::Method));
        assert_eq!(url(Method::OPTIONS, "/v1/x", None), Err(Refusal::Method));
    }

    #[test]
    fn a_path_that_could_climb_out_of_the_base_is_refused() {
        for p in [
            "/v1/../slots",
            "/v1/./x",
            "/v1/%2e%2E/slots",
            "/v1/.%2e/metrics",
            "/v1/a%2f..%2fslots",
            "/v1/a%5cb",
            "/v1/a\\b",
        ] {
            assert_eq!(url(Method::GET, p, None), Err(Refusal::DotSegment), "{p}");
        }
        // A dot inside a name is a name.
        assert!(url(Method::GET, "/v1/models/qwen2.5-0.5b", None).is_ok());
        assert!(url(Method::GET, "/v1/files/...", None).is_ok());
    }
}
