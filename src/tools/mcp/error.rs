//! Why an MCP server could not be used.

use std::time::Duration;

use super::command_line::CommandLineError;

/// Why an MCP server could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The command line is empty or badly quoted.
    #[error("bad MCP server command line `{command}`: {reason}")]
    CommandLine {
        /// The server's command line, as configured.
        command: String,
        /// What is wrong with it.
        #[source]
        reason: CommandLineError,
    },
    /// The program could not be started (not found, not executable, …).
    #[error("cannot start MCP server `{command}`: {source}")]
    Spawn {
        /// The server's command line, as configured.
        command: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Initialisation or tool listing took longer than the start timeout.
    #[error("MCP server `{command}` did not start within {timeout:?}{stderr}")]
    StartTimeout {
        /// The server's command line, as configured.
        command: String,
        /// The start timeout that ran out.
        timeout: Duration,
        /// The last lines of the server's stderr (formatted, may be empty).
        stderr: String,
    },
    /// The server exited or answered something that is not an MCP initialisation.
    #[error("MCP server `{command}` failed to initialise: {source}{stderr}")]
    Initialize {
        /// The server's command line, as configured.
        command: String,
        /// The MCP client's error (the handshake broke, or the server closed its end); boxed,
        /// as it is large.
        #[source]
        source: Box<rmcp::service::ClientInitializeError>,
        /// The last lines of the server's stderr (formatted, may be empty).
        stderr: String,
    },
    /// The server initialised but could not list its tools.
    #[error("MCP server `{command}` could not list its tools: {source}{stderr}")]
    ListTools {
        /// The server's command line, as configured.
        command: String,
        /// The MCP client's error for the `tools/list` request (boxed, as it is large).
        #[source]
        source: Box<rmcp::ServiceError>,
        /// The last lines of the server's stderr (formatted, may be empty).
        stderr: String,
    },
}
