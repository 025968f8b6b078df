//! Errors while loading or rendering a template.

/// Errors while loading or rendering a template.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PromptError {
    /// A template file could not be read.
    #[error("cannot read template {path}: {source}")]
    Read {
        /// The template file's path, as given.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A template has a syntax error or failed to render.
    #[error("template `{name}`: {source:#}")]
    Template {
        /// Which template.
        name: String,
        /// The minijinja error (with line).
        source: minijinja::Error,
    },
}
