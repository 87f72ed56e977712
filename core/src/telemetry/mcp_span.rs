//! The span of an MCP request the host sends (`tools/call {tool}`, `tools/list`,
//! `initialize`; kind client), whose context the request carries in `_meta.traceparent`
//! where it has one: the server's span is its child.

use std::borrow::Cow;

use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;

use super::masked;
use super::names::*;
use super::span::Span;

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

    fn new(method: &'static str, server: &str, tool: Option<&str>) -> Self {
        if !super::span::recording() {
            return Self(Span::none());
        }
        let tool = tool.map(masked);
        let name = match &tool {
            Some(tool) => Cow::Owned(format!("{method} {tool}")),
            None => Cow::Borrowed(method),
        };
        Self(Span::start(
            || name,
            SpanKind::Client,
            || {
                let mut attributes = vec![
                    KeyValue::new(MCP_METHOD_NAME, method),
                    KeyValue::new(MCP_SERVER, masked(server)),
                ];
                if let Some(tool) = tool {
                    attributes.push(KeyValue::new(GEN_AI_TOOL_NAME, tool));
                }
                attributes
            },
        ))
    }

    /// The span itself (to run the request in).
    pub(crate) fn span(&self) -> &Span {
        &self.0
    }

    /// Records that the request failed: `kind` (a [`ToolError`](plugin_api::ToolError)'s kind,
    /// or what went wrong) and the message, masked.
    pub(crate) fn failed(&self, kind: &str, message: &str) {
        self.0.failed(kind, message);
    }

    /// Records the error the request ended with, if it failed.
    pub(crate) fn ended<T>(&self, outcome: &Result<T, plugin_api::ToolError>) {
        if let Err(e) = outcome {
            self.failed(e.kind().as_str(), e.message());
        }
    }
}
