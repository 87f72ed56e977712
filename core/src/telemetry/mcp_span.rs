//! The span of an MCP request the host sends (`tools/call {tool}`, kind client), whose
//! context the request carries in `_meta.traceparent`: the server's span is its child.

use tracing::field::Empty;
use tracing::Span;

use super::names::*;
use super::{masked, TARGET};
use plugin_api::ToolError;

/// One MCP request sent, for its duration.
pub(crate) struct McpClientSpan(Span);

impl McpClientSpan {
    /// The span of a `tools/call` of the server's tool `tool`, a child of the current span.
    pub(crate) fn tools_call(tool: &str) -> Self {
        let method = "tools/call";
        if !tracing::enabled!(target: TARGET, tracing::Level::INFO) {
            return Self(Span::none());
        }
        let tool = masked(tool);
        Self(tracing::info_span!(
            target: TARGET,
            "mcp_request",
            { OTEL_NAME } = format!("{method} {tool}"),
            { OTEL_KIND } = "client",
            { MCP_METHOD_NAME } = method,
            { GEN_AI_TOOL_NAME } = tool.as_str(),
            { ERROR_TYPE } = Empty,
            { OTEL_STATUS_CODE } = Empty,
            { OTEL_STATUS_DESCRIPTION } = Empty,
        ))
    }

    /// The span itself (to instrument the request with).
    pub(crate) fn span(&self) -> &Span {
        &self.0
    }

    /// Records the error the request ended with, if it failed.
    pub(crate) fn ended<T>(&self, outcome: &Result<T, ToolError>) {
        if let (Err(e), false) = (outcome, self.0.is_disabled()) {
            self.0.record(ERROR_TYPE, e.kind().as_str());
            self.0.record(OTEL_STATUS_CODE, "error");
            self.0.record(OTEL_STATUS_DESCRIPTION, masked(e.message()));
        }
    }
}
