//! Which server URLs a session file may name: `continue` reuses a recorded base URL only when it
//! is on this machine and shaped like an API root tagloop writes (the threat model,
//! docs/security.md). Parsed, never matched as text.

/// Whether `url` names a server on this machine: an `http` or `https` URL whose host is in
/// 127.0.0.0/8, is `::1`, or is `localhost`. Parsed, never matched as text, so
/// `http://127.0.0.1.evil.example` and `http://127.0.0.1@evil.example` are not.
pub fn is_loopback_url(url: &str) -> bool {
    let Ok(u) = url::Url::parse(url) else {
        return false;
    };
    if !matches!(u.scheme(), "http" | "https") {
        return false;
    }
    match u.host() {
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// Whether a base URL from a session file may be used again: a loopback one ([`is_loopback_url`])
/// shaped like the API roots tagloop writes, with no user info, query or fragment, and the path
/// `/v1` or none (a pasted `/chat/completions` or `/completions` removed, as the client does).
/// A session can then only reach the OpenAI-compatible API of a local server, never another of
/// its endpoints (`http://127.0.0.1:11434/api/pull#` would POST the conversation to Ollama's
/// model download).
pub fn session_url_reusable(url: &str) -> bool {
    let Ok(u) = url::Url::parse(url) else {
        return false;
    };
    let path = u.path().trim_end_matches('/');
    let path = ["/chat/completions", "/completions"]
        .iter()
        .find_map(|s| path.strip_suffix(s))
        .unwrap_or(path)
        .trim_end_matches('/');
    is_loopback_url(url)
        && u.username().is_empty()
        && u.password().is_none()
        && u.query().is_none()
        && u.fragment().is_none()
        && matches!(path, "" | "/v1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_urls_are_told_apart_from_look_alikes() {
        for yes in [
            "http://127.0.0.1:8080/v1",
            "http://127.9.8.7/v1",
            "https://[::1]:8443/v1",
            "http://localhost:11434/v1",
            "http://LOCALHOST/v1",
            "http://user:pw@127.0.0.1/v1",
        ] {
            assert!(is_loopback_url(yes), "{yes}");
        }
        for no in [
            "http://127.0.0.1.nip.io/v1",
            "http://localhost.evil.example/v1",
            "http://127.0.0.1@evil.example/v1",
            "http://10.0.0.7/v1",
            "http://[::ffff:7f00:1]/v1",
            "http://0.0.0.0/v1",
            "file:///tmp/x",
            "127.0.0.1:8080",
            "not a url",
        ] {
            assert!(!is_loopback_url(no), "{no}");
        }
    }

    #[test]
    fn only_a_loopback_api_root_from_a_session_is_reused() {
        for yes in [
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434/v1/",
            "http://[::1]",
        ] {
            assert!(session_url_reusable(yes), "{yes}");
        }
        for no in [
            "http://127.0.0.1:11434/api/pull#",
            "http://127.0.0.1:11434/api/pull?x=/v1",
            "http://127.0.0.1:8080/v1?",
            "http://127.0.0.1:8080/v1#x",
            "http://user:pw@127.0.0.1:8080/v1",
            "http://127.0.0.1:11434/api/chat",
            "http://127.0.0.1:8080/v1/../api/pull",
            "http://evil.example/v1",
        ] {
            assert!(!session_url_reusable(no), "{no}");
        }
    }
}
