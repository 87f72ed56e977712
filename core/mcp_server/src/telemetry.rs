//! Every MCP request served ([`Request`]): its span, `{method} {name}` with `mcp.method.name`,
//! a child of the client's trace when the request's `_meta` carries a `traceparent` (read with
//! the propagator the binary installed; without one, the span starts a trace of its own), and
//! the request counted and timed in the metrics.

use std::borrow::Cow;
use std::future::Future;
use std::time::Instant;

use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;
use rmcp::model::{CallToolResponse, RequestMetaObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use toolhost::telemetry::names::{MCP_METHOD_NAME, MCP_REQUEST_ID, TASK_ID};
use toolhost::telemetry::{masked, metrics, Span};

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
        Self {
            method,
            tool: None,
            span,
            started,
        }
    }

    /// Counts the request under `tool` (a `tools/call`'s: [`crate::tools::metric_label`]).
    pub(crate) fn for_tool(mut self, tool: Option<String>) -> Self {
        self.tool = tool;
        self
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
        let answered = self.span.own(answer).await;
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
/// id `id`, a child of the span whose `traceparent` its `_meta` carries.
pub(crate) fn request_span(
    method: &'static str,
    name: Option<&str>,
    id: &impl std::fmt::Display,
    meta: &RequestMetaObject,
) -> Span {
    let title = || match name {
        Some(name) => Cow::Owned(format!("{method} {}", masked(name))),
        None => Cow::Borrowed(method),
    };
    let attributes = || {
        vec![
            KeyValue::new(MCP_METHOD_NAME, method),
            KeyValue::new(MCP_REQUEST_ID, masked(&id.to_string())),
        ]
    };
    let (traceparent, tracestate) = (meta.get_traceparent(), meta.get_tracestate());
    Span::start_remote(title, SpanKind::Server, attributes, traceparent, tracestate)
}

/// The span of a task's run in the background (`task {tool}`, with `toolhost.task.id`), a
/// child of the current span: the `tools/call` request that created the task.
pub(crate) fn task_span(tool: &str, id: &str) -> Span {
    Span::start(
        || Cow::Owned(format!("task {}", masked(tool))),
        SpanKind::Internal,
        || vec![KeyValue::new(TASK_ID, masked(id))],
    )
}
