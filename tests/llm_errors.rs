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
