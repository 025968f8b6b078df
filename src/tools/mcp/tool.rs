//! One MCP tool as a tagloop [`Tool`]: the call under the gates (`--confirm`, read-only or
//! write), its time limit, and the result rendered as text for the model.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::future::BoxFuture;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock};
use rmcp::service::ServiceError;
use serde_json::{Map, Value};

use super::Conn;
use crate::tools::{Tool, ToolError};

pub(super) struct McpTool {
    pub(super) local: String,
    pub(super) remote: String,
    pub(super) description: String,
    pub(super) parameters: Value,
    /// Whether the tool counts as read-only (no confirmation asked).
    pub(super) read_only: bool,
    pub(super) conn: Arc<Conn>,
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.local
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn call(&self, args: Map<String, Value>) -> BoxFuture<'_, Result<String, ToolError>> {
        Box::pin(async move {
            let conn = &self.conn;
            if conn.shut_down.load(Ordering::SeqCst) {
                return Err(ToolError::Failed(format!(
                    "MCP server `{}` was shut down",
                    conn.server
                )));
            }
            if conn.peer.is_transport_closed() {
                return Err(conn.gone());
            }
            if !self.read_only
                && let Some(c) = &conn.confirm
            {
                let shown = serde_json::to_string(&args).unwrap_or_default();
                let what = format!(
                    "{}: MCP tool of server `{}` that may change things\n  arguments: {}",
                    self.local,
                    conn.server,
                    preview(&shown, 2000)
                );
                if !c.confirm(&what).await {
                    return Err(ToolError::Refused(
                        "the user declined this action; do not retry it, choose another way or give a final answer"
                            .to_string(),
                    ));
                }
            }
            let params = CallToolRequestParams::new(self.remote.clone()).with_arguments(args);
            let answer =
                tokio::time::timeout(conn.call_timeout, conn.peer.call_tool_once(params)).await;
            match answer {
                Err(_) => Err(ToolError::Timeout(conn.call_timeout)),
                Ok(Ok(CallToolResponse::Complete(result))) => render_result(result),
                Ok(Ok(_)) => Err(ToolError::Failed(format!(
                    "MCP server `{}` asked for more input or started a background task; tagloop does not support that",
                    conn.server
                ))),
                Ok(Err(ServiceError::McpError(e))) => Err(ToolError::Failed(format!(
                    "MCP server `{}` answered with an error: {}",
                    conn.server, e.message
                ))),
                Ok(Err(
                    ServiceError::TransportClosed
                    | ServiceError::TransportSend(_)
                    | ServiceError::Cancelled { .. },
                )) => Err(conn.gone()),
                Ok(Err(e)) => Err(ToolError::Failed(format!(
                    "MCP server `{}`: {e}",
                    conn.server
                ))),
            }
        })
    }
}

/// At most `max` bytes of `text` (cut at a character boundary, with a marker).
pub(super) fn preview(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    format!(
        "{} ({} bytes)",
        crate::text::clip_bytes(text, max),
        text.len()
    )
}

/// The observation for a tool result: text blocks joined by newlines, other blocks described;
/// `is_error` makes it a [`ToolError::Failed`] with the same text.
pub(super) fn render_result(result: CallToolResult) -> Result<String, ToolError> {
    let mut parts: Vec<String> = Vec::new();
    for block in &result.content {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::Image(i) => parts.push(format!(
                "[image: {}, {} bytes base64]",
                i.mime_type,
                i.data.len()
            )),
            ContentBlock::Audio(a) => parts.push(format!(
                "[audio: {}, {} bytes base64]",
                a.mime_type,
                a.data.len()
            )),
            ContentBlock::Resource(r) => match &r.resource {
                rmcp::model::ResourceContents::TextResourceContents { uri, text, .. } => {
                    parts.push(format!("[resource {uri}]\n{text}"));
                }
                rmcp::model::ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => parts.push(format!(
                    "[resource {uri}: {}, {} bytes base64]",
                    mime_type.as_deref().unwrap_or("binary"),
                    blob.len()
                )),
                other => parts.push(format!(
                    "[resource: {}]",
                    serde_json::to_string(other).unwrap_or_default()
                )),
            },
            ContentBlock::ResourceLink(link) => parts.push(format!(
                "[resource link: {}]",
                serde_json::to_string(link).unwrap_or_default()
            )),
            other => parts.push(format!(
                "[content: {}]",
                serde_json::to_string(other).unwrap_or_default()
            )),
        }
    }
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    if result.is_error == Some(true) {
        Err(ToolError::Failed(if text.is_empty() {
            "the tool reported an error without a message".to_string()
        } else {
            text
        }))
    } else {
        Ok(text)
    }
}
