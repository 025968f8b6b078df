//! `LlmError`: messages that say what to do, the status and retry predicates, and redaction of
//! every text an error carries.

use tagloop::llm::LlmError;
use tagloop::secret::Redactor;

#[test]
fn messages_are_actionable() {
    let e = LlmError::Connect {
        url: "http://127.0.0.1:11434/v1".into(),
        reason: "connection refused".into(),
    };
    assert_eq!(
        e.to_string(),
        "cannot connect to http://127.0.0.1:11434/v1: connection refused — is the server running?"
    );
    assert!(e.is_retryable());
    let e = LlmError::NotFound {
        model: "llama3".into(),
        url: "http://x/v1".into(),
        message: String::new(),
    };
    assert!(
        e.to_string()
            .starts_with("the server answered 404 for model 'llama3': check --model")
    );
    assert_eq!(e.status(), Some(404));
    assert!(!e.is_retryable());
    let g = LlmError::GaveUp {
        attempts: 3,
        last: Box::new(LlmError::Http {
            status: 503,
            url: "u".into(),
            message: "busy".into(),
        }),
    };
    assert_eq!(g.status(), Some(503));
    assert!(g.to_string().ends_with("(gave up after 3 attempts)"));
}

#[test]
fn redacted_removes_the_key_from_every_message() {
    let key = "sk-echoed-0123456789";
    let r = Redactor::with([key]);
    let e = LlmError::GaveUp {
        attempts: 2,
        last: Box::new(LlmError::Unauthorized {
            status: 401,
            url: "http://h/v1".into(),
            message: format!("Incorrect API key provided: Bearer {key}"),
        }),
    };
    assert!(e.to_string().contains(key));
    let e = e.redacted(&r);
    assert!(!e.to_string().contains(key), "{e}");
    assert!(e.to_string().contains("[redacted]"));
    assert_eq!(e.status(), Some(401));
}

/// A base URL that names no API version (the server's root): its 404 says first to add /v1.
/// One with a version anywhere in its path keeps the model-name message.
#[test]
fn a_404_without_an_api_version_says_to_add_v1() {
    let not_found = |url: &str| {
        LlmError::NotFound {
            model: "llama3".into(),
            url: url.into(),
            message: String::new(),
        }
        .to_string()
    };
    assert_eq!(
        not_found("http://127.0.0.1:8080"),
        "the server answered 404 at http://127.0.0.1:8080: most servers serve the OpenAI API under /v1 — try --base-url http://127.0.0.1:8080/v1"
    );
    for bare in ["http://h:8080", "http://h/api", "http://h/vault"] {
        assert!(not_found(bare).contains("try --base-url"), "{bare}");
    }
    for versioned in [
        "http://h/v1",
        "https://api.groq.com/openai/v1",
        "https://generativelanguage.googleapis.com/v1beta/openai",
    ] {
        assert!(
            not_found(versioned).contains("check --model"),
            "{versioned}"
        );
    }
    // No model asked for: the 404 was the model list's (`served_models`).
    let list = LlmError::NotFound {
        model: String::new(),
        url: "http://h/v1".into(),
        message: String::new(),
    };
    assert_eq!(
        list.to_string(),
        "no model list at http://h/v1 (404): pass --model NAME"
    );
}
