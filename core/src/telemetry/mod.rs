//! Observability: the spans of a tool call (`tool_span.rs`), of a model request
//! (`chat_span.rs`) and of an MCP request sent (`mcp_span.rs`), with the attribute names of
//! `names.rs`, the trace context passed on to workers, MCP servers, model servers and plugins
//! (`propagation.rs`), and the process's metrics (`metrics.rs`). Nothing here exports: the spans are
//! plain `tracing` spans of [`TARGET`], which a binary may send on as OpenTelemetry traces
//! (`toolhost serve-mcp` and the other commands do when the `OTEL_*` variables ask for it);
//! the metrics (one OpenTelemetry meter) are read as OpenMetrics text ([`metrics::render`],
//! `openmetrics.rs`) and exported by a binary that gives them an exporter.
//!
//! Every string put into an attribute is masked first with every secret in force in the
//! process, as log lines are.

mod chat_span;
mod mcp_span;
pub mod metrics;
pub mod names;
mod openmetrics;
pub mod propagation;
mod tool_span;

pub(crate) use chat_span::ChatSpan;
pub(crate) use mcp_span::McpClientSpan;
pub use propagation::traceparent;
pub(crate) use tool_span::{breaker_moved, execute, retrying, step};
pub use tool_span::{with_call_id, ToolSpan};

/// The `tracing` target of every span and event meant for export: an exporter takes these
/// and nothing else, so no other crate's event (which could carry any value) leaves the
/// process.
pub const TARGET: &str = "toolhost::telemetry";

/// `text` with every secret in force in the process masked.
pub fn masked(text: &str) -> String {
    crate::secrets::mask_log_line(text).into_owned()
}
