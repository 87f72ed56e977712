//! The span of each MCP request served, `{method} {name}` with `mcp.method.name`, a child of
//! the client's trace when the request's `_meta` carries a `traceparent` (read with the
//! propagator the binary installed; without one, the span starts a trace of its own), and the
//! request counted in the metrics.

use std::collections::HashMap;

use rmcp::model::RequestMetaObject;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use toolhost::telemetry::names::{MCP_METHOD_NAME, MCP_REQUEST_ID, OTEL_KIND, OTEL_NAME};
use toolhost::telemetry::{masked, metrics, TARGET};

/// The span of a request of `method` (about `name`, the tool's for `tools/call`) with JSON-RPC
/// id `id`.
pub(crate) fn request_span(
    method: &'static str,
    name: Option<&str>,
    id: &impl std::fmt::Display,
    meta: &RequestMetaObject,
) -> Span {
    metrics::mcp_request(method);
    let span = tracing::info_span!(
        target: TARGET,
        "mcp_request",
        { OTEL_NAME } = tracing::field::Empty,
        { OTEL_KIND } = "server",
        { MCP_METHOD_NAME } = method,
        { MCP_REQUEST_ID } = tracing::field::Empty,
    );
    if span.is_disabled() {
        return span;
    }
    let title = match name {
        Some(name) => format!("{method} {}", masked(name)),
        None => method.to_owned(),
    };
    span.record(OTEL_NAME, title);
    span.record(MCP_REQUEST_ID, masked(&id.to_string()));
    if let Some(traceparent) = meta.get_traceparent() {
        let mut carrier = HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
        if let Some(state) = meta.get_tracestate() {
            carrier.insert("tracestate".to_owned(), state.to_owned());
        }
        let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&carrier));
        // Refused only when no OpenTelemetry layer records the span: nothing to parent then.
        let _ = span.set_parent(parent);
    }
    span
}
