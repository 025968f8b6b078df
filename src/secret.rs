//! Secrets: values that must never be printed or stored, and the redactor that keeps them out of
//! everything tagloop shows or writes.
//!
//! Two defences work together:
//!
//! * [`Secret`] wraps a value (an API key) so that `Debug` and `Display` never show it; code must
//!   call [`Secret::expose`] on purpose, at the one place the value is needed (an HTTP header).
//! * [`Redactor`] holds every secret tagloop knows of in a run and replaces each one, and the cheap
//!   forms derived from it, with `[redacted]` in text that came from elsewhere: a server's error
//!   body that echoes the key, a tool's output, an event or a transcript record. It is applied
//!   at the boundary where such text enters tagloop (the model client builds its errors from
//!   redacted bodies) and, as defence in depth, again where text leaves it (the CLI's outcome,
//!   events and transcript).
//!
//! The derived forms are the ones an accident or a lazy attack produces: the key reversed, and the
//! key base64-encoded (standard and URL-safe alphabets), alone or as `Bearer <key>`, at any byte
//! alignment inside a longer base64 text. A determined attacker with a shell can always find an
//! encoding not on this list (hex, one character per line, …); docs/security.md says so.

mod redactor;
mod stream;

pub use redactor::{MIN_SECRET_LEN, REDACTED, Redactor};
pub use stream::{ByteStreamRedactor, StreamRedactor};

/// A string that is never printed: `Debug` and `Display` show `***` (or `""` when empty).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a secret.
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The secret itself (to put in a header). Every call site is a place the key leaves tagloop.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            f.write_str("\"\"")
        } else {
            f.write_str("***")
        }
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-test-0123456789abcdefXYZ";

    #[test]
    fn secret_is_never_printed() {
        let s = Secret::new(KEY);
        assert_eq!(format!("{s:?}"), "***");
        assert_eq!(s.to_string(), "***");
        assert_eq!(format!("{:?}", Secret::default()), "\"\"");
        assert_eq!(s.expose(), KEY);
    }
}
