//! A tool call's span, `execute_tool {tool}`, with its attributes, and the call's metrics
//! when it ends.

use std::borrow::Cow;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;

use super::names::*;
use super::span::{event, InSpan, Span};
use super::{masked, metrics};
use plugin_api::{RiskLevel, ToolError};

tokio::task_local! {
    static CALL_ID: Arc<str>;
}

/// Runs `call` with `id` as the `gen_ai.tool.call.id` of the tool calls it makes (the model's
/// tool call id, or the JSON-RPC id of an MCP `tools/call`).
pub async fn with_call_id<F: Future>(id: &str, call: F) -> F::Output {
    CALL_ID.scope(id.into(), call).await
}

/// One tool call's span and its start, for its duration.
pub struct ToolSpan {
    span: Span,
    started: Instant,
    /// The tool's name once the request resolved to one (the metrics' label).
    tool: OnceLock<Arc<str>>,
}

impl ToolSpan {
    /// The span of a call of `request` (`name` or `name:method`), a child of the current span.
    pub(crate) fn start(request: &str) -> Self {
        let span = match super::span::recording() {
            true => {
                let request = masked(request);
                let (tool, method) = match request.split_once(':') {
                    Some((tool, method)) => (tool, Some(method)),
                    None => (request.as_str(), None),
                };
                let name = format!("{EXECUTE_TOOL} {tool}");
                Span::start(
                    || Cow::Owned(name),
                    SpanKind::Internal,
                    || {
                        let mut attributes = Vec::with_capacity(12);
                        attributes.push(KeyValue::new(GEN_AI_OPERATION_NAME, EXECUTE_TOOL));
                        attributes.push(KeyValue::new(GEN_AI_TOOL_NAME, tool.to_owned()));
                        if let Some(method) = method {
                            attributes.push(KeyValue::new(TOOL_METHOD, method.to_owned()));
                        }
                        if let Ok(id) = CALL_ID.try_with(|id| masked(id)) {
                            attributes.push(KeyValue::new(GEN_AI_TOOL_CALL_ID, id));
                        }
                        attributes
                    },
                )
            }
            false => Span::none(),
        };
        Self {
            span,
            started: Instant::now(),
            tool: OnceLock::new(),
        }
    }

    /// Runs the call within this span: its steps are children of it.
    pub(crate) fn run<F: Future>(&self, call: F) -> InSpan<F> {
        self.span.run(call)
    }

    /// Describes the tool the request resolved to: its name, its layer (`mcp` for an MCP
    /// server's tool; made only when the span is recorded), its library's SHA-256 (likewise),
    /// its risk and whether it runs in a worker.
    pub(crate) fn resolved<'a>(
        &self,
        tool: &Arc<str>,
        layer: impl FnOnce() -> String,
        sha256: impl FnOnce() -> Option<&'a str>,
        risk: RiskLevel,
        isolated: bool,
    ) {
        let _ = self.tool.set(tool.clone());
        self.span.set(|| {
            let mut attributes = vec![
                KeyValue::new(TOOL_LAYER, masked(&layer())),
                KeyValue::new(TOOL_RISK, risk.as_str()),
                KeyValue::new(TOOL_ISOLATED, isolated),
            ];
            if let Some(sha256) = sha256() {
                attributes.push(KeyValue::new(LIBRARY_SHA256, sha256.to_owned()));
            }
            attributes
        });
    }

    /// Records how the call ended, on the span and in the metrics.
    pub(crate) fn ended(&self, outcome: Result<(), &ToolError>) {
        match outcome {
            Ok(()) => self.span.set(|| vec![KeyValue::new(CALL_OUTCOME, "ok")]),
            Err(e) => {
                self.span.set(|| vec![KeyValue::new(CALL_OUTCOME, "error")]);
                self.span.failed(e.kind().as_str(), e.message());
            }
        }
        if metrics::enabled() {
            let tool = self.tool.get().map_or("(unresolved)", |t| &**t);
            let kind = outcome.err().map(|e| e.kind().as_str());
            metrics::call_ended(&masked(tool), kind, self.started.elapsed());
        }
    }
}

/// A step of a call, as a child of its span: `approval` or `validation`.
pub(crate) fn step(name: &'static str) -> Span {
    Span::start(|| Cow::Borrowed(name), SpanKind::Internal, Vec::new)
}

/// The run of an extension point (`point`, masked: a point may be any name) that has
/// extensions, as a child of the current span.
pub(crate) fn extension_point(point: &str) -> Span {
    Span::start(|| Cow::Owned(masked(point)), SpanKind::Internal, Vec::new)
}

/// The span of one attempt of the plugin's `execute`.
pub(crate) fn execute(attempt: u32) -> Span {
    let attributes = || vec![KeyValue::new(ATTEMPT, i64::from(attempt))];
    Span::start(|| Cow::Borrowed("execute"), SpanKind::Internal, attributes)
}

/// A retry, as an event of the call's span: the error kind it follows, and the attempt next.
pub(crate) fn retrying(kind: &str, next_attempt: u32) {
    event("retry", || {
        vec![
            KeyValue::new(ERROR_TYPE, kind.to_owned()),
            KeyValue::new(ATTEMPT, i64::from(next_attempt)),
        ]
    });
}

/// A breaker's change of state, as an event of the call's span.
pub(crate) fn breaker_moved(tool: &str, from: &str, to: &str) {
    metrics::breaker(tool, to);
    event("circuit breaker", || {
        vec![
            KeyValue::new(GEN_AI_TOOL_NAME, masked(tool)),
            KeyValue::new("from", from.to_owned()),
            KeyValue::new("to", to.to_owned()),
        ]
    });
}
