//! The format serve asks the upstream in: its own text protocol, or the model's own tool-call
//! format where the server's chat template declares one (`src/serve/native/`).

use std::str::FromStr;

/// Which format serve asks the upstream in (`--tool-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ToolFormat {
    /// tagloop's text protocol, always (the default: on the one model measured both ways,
    /// Qwen2.5-Coder-0.5B, the protocol measured better; docs/experiments.md).
    #[default]
    Protocol,
    /// The model's own tool-call format; a 502 when the upstream publishes no chat template
    /// that declares tools.
    Native,
    /// The model's own format where its template declares tools, the protocol elsewhere.
    Auto,
}

impl FromStr for ToolFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "protocol" => Ok(ToolFormat::Protocol),
            "native" => Ok(ToolFormat::Native),
            "auto" => Ok(ToolFormat::Auto),
            other => Err(format!(
                "unknown tool format '{other}': expected protocol, native or auto"
            )),
        }
    }
}
