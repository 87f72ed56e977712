//! The span of an MCP request the host sends (`tools/call {tool}`, `tools/list`,
//! `initialize`; kind client), whose context the request carries in `_meta.traceparent`
//! where it has one: the server's span is its child.

use tracing::field::Empty;
use tracing::Span;

use super::names::*;
use super::{masked, TARGET};

/// One MCP request sent, for its duration.
pub(crate) struct McpClientSpan(Span);

impl McpClientSpan {
    /// The span of a `tools/call` of the server's tool `tool`, a child of the current span.
    pub(crate) fn tools_call(server: &str, tool: &str) -> Self {
        Self::new("tools/call", server, Some(tool))
    }

    /// The span of a request without a target (`initialize`, `tools/list`) sent to `server`
    /// (its name in `mcp.json`), a child of the current span.
    pub(crate) fn request(method: &'static str, server: &str) -> Self {
        Self::new(method, server, None)
    }

    fn new(method: &str, server: &str, tool: Option<&str>) -> Self {
        if !tracing::enabled!(target: TARGET, tracing::Level::INFO) {
            return Self(Span::none());
        }
        let tool = tool.map(masked);
        let name = match &tool {
            Some(tool) => format!("{method} {tool}"),
            None => method.to_owned(),
        };
        Self(tracing::info_span!(
            target: TARGET,
            "mcp_request",
            { OTEL_NAME } = name,
            { OTEL_KIND } = "client",
            { MCP_METHOD_NAME } = method,
            { MCP_SERVER } = masked(server).as_str(),
            { GEN_AI_TOOL_NAME } = tool.as_deref(),
            { ERROR_TYPE } = Empty,
            { OTEL_STATUS_CODE } = Empty,
            { OTEL_STATUS_DESCRIPTION } = Empty,
        ))
    }

    /// The span itself (to instrument the request with).
    pub(crate) fn span(&self) -> &Span {
        &self.0
    }

    /// Records that the request failed: `kind` (a [`ToolError`](plugin_api::ToolError)'s kind,
    /// or what went wrong) and the message, masked.
    pub(crate) fn failed(&self, kind: &str, message: &str) {
        if !self.0.is_disabled() {
            self.0.record(ERROR_TYPE, kind);
            self.0.record(OTEL_STATUS_CODE, "error");
            self.0.record(OTEL_STATUS_DESCRIPTION, masked(message));
        }
    }

    /// Records the error the request ended with, if it failed.
    pub(crate) fn ended<T>(&self, outcome: &Result<T, plugin_api::ToolError>) {
        if let Err(e) = outcome {
            self.failed(e.kind().as_str(), e.message());
        }
    }
}
