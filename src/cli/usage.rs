//! The one usage-error path of the CLI: every error that is the user's to fix becomes a
//! [`UsageError`], which `cli/mod.rs` turns into exit code 2.

/// A usage or configuration error (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Turn an error into a usage error.
pub fn usage<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::Error::new(UsageError(format!("{e:#}")))
}

/// Turn an error with causes into a usage error that says each cause once.
///
/// Many library errors put their cause in their own message *and* expose it as their source
/// (`cannot read role file x: No such file…` whose source is that same IO error), so the
/// plain `{:#}` chain would end with the reason twice. A cause whose text the message already
/// ends with adds nothing, and is left out.
pub fn usage_chain(e: &anyhow::Error) -> anyhow::Error {
    let mut text = String::new();
    for cause in e.chain() {
        let said = cause.to_string();
        if text.is_empty() {
            text = said;
        } else if !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
    }
    anyhow::Error::new(UsageError(text))
}
