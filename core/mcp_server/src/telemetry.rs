//! Every MCP request served ([`Traced`]): its span, `{method} {name}` with `mcp.method.name`,
//! a child of the client's trace when the request's `_meta` carries a `traceparent` (read with
//! the propagator the binary installed; without one, the span starts a trace of its own), and
//! the request counted and timed in the metrics.

use std::collections::HashMap;
use std::future::Future;
use std::time::Instant;

use rmcp::model::{CallToolResponse, RequestMetaObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use tracing::{Instrument as _, Span};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use toolhost::telemetry::names::{MCP_METHOD_NAME, MCP_REQUEST_ID, OTEL_KIND, OTEL_NAME, TASK_ID};
use toolhost::telemetry::{masked, metrics, TARGET};

/// An MCP request being served: its span, and its duration recorded by method (and tool, for
/// `tools/call`) when it is answered, with its error if it failed: the JSON-RPC code, or
/// `tool_error` for a tool's own failure (`isError`).
pub(crate) struct Request {
    method: &'static str,
    tool: Option<String>,
    span: Span,
    started: Instant,
}

impl Request {
    /// A request of `method` about `name` (a tool's or a prompt's), with `context`'s id and
    /// `_meta`.
    pub(crate) fn new(
        method: &'static str,
        name: Option<&str>,
        context: &RequestContext<RoleServer>,
    ) -> Self {
        let started = Instant::now();
        let span = request_span(method, name, &context.id, &context.meta);
        let tool = name.filter(|_| method == "tools/call").map(str::to_owned);
        Self {
            method,
            tool,
            span,
            started,
        }
    }

    /// `answer`, run in the request's span and timed.
    pub(crate) async fn serve<T>(
        self,
        answer: impl Future<Output = Result<T, ErrorData>>,
    ) -> Result<T, ErrorData> {
        self.serve_judged(answer, |_| false).await
    }

    /// A `tools/call`'s `answer`, whose `isError` results are counted as failures.
    pub(crate) async fn serve_call(
        self,
        answer: impl Future<Output = Result<CallToolResponse, ErrorData>>,
    ) -> Result<CallToolResponse, ErrorData> {
        let failed = |r: &CallToolResponse| matches!(r, CallToolResponse::Complete(done) if done.is_error == Some(true));
        self.serve_judged(answer, failed).await
    }

    async fn serve_judged<T>(
        self,
        answer: impl Future<Output = Result<T, ErrorData>>,
        tool_error: impl Fn(&T) -> bool,
    ) -> Result<T, ErrorData> {
        let answered = answer.instrument(self.span).await;
        let code;
        let error = match &answered {
            Err(e) => {
                code = e.code.0.to_string();
                Some(code.as_str())
            }
            Ok(done) if tool_error(done) => Some("tool_error"),
            Ok(_) => None,
        };
        let took = self.started.elapsed();
        metrics::mcp_request(self.method, self.tool.as_deref(), error, took);
        answered
    }
}

/// The span of a request of `method` (about `name`, the tool's for `tools/call`) with JSON-RPC
/// id `id`.
pub(crate) fn request_span(
    method: &str,
    name: Option<&str>,
    id: &impl std::fmt::Display,
    meta: &RequestMetaObject,
) -> Span {
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

/// The span of a task's run in the background (`task {tool}`, with `toolhost.task.id`), a
/// child of the current span: the `tools/call` request that created the task.
pub(crate) fn task_span(tool: &str, id: &str) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "mcp_task",
        { OTEL_NAME } = tracing::field::Empty,
        { TASK_ID } = tracing::field::Empty,
    );
    if !span.is_disabled() {
        span.record(OTEL_NAME, format!("task {}", masked(tool)));
        span.record(TASK_ID, masked(id));
    }
    span
}
