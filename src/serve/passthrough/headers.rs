//! The headers that cross the pass-through, each way.
//!
//! * **To the upstream**, an allow-list: the body's own headers (`Content-Type` with a
//!   multipart boundary, `Content-Encoding`, `Content-Language`), `Accept`, and the API
//!   version headers the SDKs send (`OpenAI-Beta`, `anthropic-version`, `anthropic-beta`).
//!   Nothing else: not the client's `Authorization` or `x-api-key` (serve's own key, replaced
//!   by the upstream's), not `Accept-Encoding` (a compressed answer could not be searched for
//!   the upstream key), not `Cookie`, not the SDKs' telemetry.
//! * **Back to the client**, every header but the hop-by-hop ones (RFC 9110 §7.6.1: they
//!   describe one connection, not the message, and those the upstream's `Connection` names),
//!   `Content-Length` (the body may change length when the key is taken out of it, and goes
//!   out chunked) and `Set-Cookie` (serve is not the upstream's site). Each value has the
//!   upstream key taken out as the body has; a value that is not text and holds the key is
//!   dropped.

use axum::http::{HeaderMap, HeaderName, HeaderValue, header};

use crate::secret::Redactor;

/// The client's headers passed to the upstream.
const FORWARDED: &[&str] = &[
    "content-type",
    "content-encoding",
    "content-language",
    "accept",
    "openai-beta",
    "anthropic-version",
    "anthropic-beta",
];

/// Headers that belong to one connection (and those an answer never passes on).
const DROPPED: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "set-cookie",
];

/// The client's headers that go to the upstream (the upstream key is added by the caller).
pub(crate) fn to_upstream(client: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for name in FORWARDED {
        for value in client.get_all(*name) {
            out.append(HeaderName::from_static(name), value.clone());
        }
    }
    out
}

/// The upstream's headers that go back to the client, the upstream key taken out.
pub(crate) fn to_client(upstream: &HeaderMap, redactor: &Redactor) -> HeaderMap {
    // The names the upstream's `Connection` lists are hop-by-hop too.
    let named: Vec<String> = upstream
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|n| n.trim().to_ascii_lowercase())
        .collect();
    let mut out = HeaderMap::new();
    for (name, value) in upstream {
        let n = name.as_str();
        if DROPPED.contains(&n) || named.iter().any(|x| x == n) {
            continue;
        }
        if let Some(value) = redacted(value, redactor) {
            out.append(name.clone(), value);
        }
    }
    out
}

/// `value` without the upstream key; `None` when it holds the key and cannot be rewritten.
fn redacted(value: &HeaderValue, redactor: &Redactor) -> Option<HeaderValue> {
    if !redactor.finds_bytes(value.as_bytes()) {
        return Some(value.clone());
    }
    let text = value.to_str().ok()?;
    HeaderValue::from_str(&redactor.redact(text)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (n, v) in pairs {
            m.append(
                HeaderName::from_bytes(n.as_bytes()).expect("name"),
                HeaderValue::from_str(v).expect("value"),
            );
        }
        m
    }

    #[test]
    fn only_the_bodys_headers_and_api_versions_go_upstream() {
        let client = map(&[
            ("authorization", "Bearer serve-key"),
            ("x-api-key", "serve-key"),
            ("content-type", "multipart/form-data; boundary=xyz"),
            ("accept-encoding", "gzip"),
            ("cookie", "a=b"),
            ("openai-beta", "assistants=v2"),
            ("x-stainless-os", "Linux"),
            ("connection", "keep-alive"),
        ]);
        let out = to_upstream(&client);
        let names: Vec<&str> = out.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["content-type", "openai-beta"]);
        assert_eq!(out["content-type"], "multipart/form-data; boundary=xyz");
    }

    #[test]
    fn hop_by_hop_headers_are_dropped_and_the_key_taken_out() {
        let upstream = map(&[
            ("connection", "close, x-hop"),
            ("x-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("content-length", "12"),
            ("set-cookie", "s=1"),
            ("content-type", "application/json"),
            ("x-request-id", "req-1"),
            ("x-echo", "key sk-up-123456789 seen"),
        ]);
        let out = to_client(&upstream, &Redactor::with(["sk-up-123456789"]));
        let names: Vec<&str> = out.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["content-type", "x-request-id", "x-echo"]);
        assert_eq!(out["x-echo"], "key [redacted] seen");
    }
}
