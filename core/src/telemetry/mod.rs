//! Observability: the spans of a tool call (`tool_span.rs`), of a model request
//! (`chat_span.rs`) and of an MCP request sent (`mcp_span.rs`), made with the tracer given to
//! [`install`] (`span.rs`), with the attribute names of `names.rs`; the trace context passed
//! on to workers, MCP servers, model servers and plugins (`propagation.rs`); and the process's
//! metrics (`metrics.rs`). Nothing here exports: a binary installs a tracer provider with an
//! exporter (`toolhost serve-mcp` and the other commands do when the `OTEL_*` variables ask
//! for it); the metrics (one OpenTelemetry meter) are read as OpenMetrics text
//! ([`metrics::render`], `openmetrics.rs`) and exported by a binary that gives them an
//! exporter.
//!
//! Every string put into an attribute is masked first with every secret in force in the
//! process, as log lines are.

mod chat_span;
#[cfg(feature = "mcp")]
mod mcp_span;
pub mod metrics;
pub mod names;
mod openmetrics;
pub mod propagation;
mod span;
mod tool_span;

pub(crate) use chat_span::ChatSpan;
#[cfg(feature = "mcp")]
pub(crate) use mcp_span::McpClientSpan;
pub use propagation::{traceparent, SpanIds};
pub(crate) use span::carried;
pub use span::{install, recording, InSpan, Span};
pub(crate) use tool_span::{breaker_moved, execute, extension_point, retrying, step};
pub use tool_span::{with_call_id, ToolSpan};

/// `text` with every secret in force in the process masked.
pub fn masked(text: &str) -> String {
    crate::secrets::mask_log_line(text).into_owned()
}
