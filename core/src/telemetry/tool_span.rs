//! A tool call's span, `execute_tool {tool}`, with its attributes, and the call's metrics
//! when it ends.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use tracing::field::Empty;
use tracing::Span;

use super::names::*;
use super::{masked, metrics, TARGET};
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
        let span = tracing::info_span!(
            target: TARGET,
            "execute_tool",
            { OTEL_NAME } = Empty,
            { GEN_AI_OPERATION_NAME } = EXECUTE_TOOL,
            { GEN_AI_TOOL_NAME } = Empty,
            { GEN_AI_TOOL_CALL_ID } = Empty,
            { TOOL_METHOD } = Empty,
            { TOOL_LAYER } = Empty,
            { LIBRARY_SHA256 } = Empty,
            { TOOL_RISK } = Empty,
            { TOOL_ISOLATED } = Empty,
            { CALL_OUTCOME } = Empty,
            { ERROR_TYPE } = Empty,
            { OTEL_STATUS_CODE } = Empty,
            { OTEL_STATUS_DESCRIPTION } = Empty,
        );
        if !span.is_disabled() {
            let request = masked(request);
            let (name, method) = match request.split_once(':') {
                Some((name, method)) => (name, Some(method)),
                None => (request.as_str(), None),
            };
            span.record(OTEL_NAME, format!("{EXECUTE_TOOL} {name}"));
            span.record(GEN_AI_TOOL_NAME, name);
            if let Some(method) = method {
                span.record(TOOL_METHOD, method);
            }
            if let Ok(id) = CALL_ID.try_with(|id| masked(id)) {
                span.record(GEN_AI_TOOL_CALL_ID, id);
            }
        }
        Self {
            span,
            started: Instant::now(),
            tool: OnceLock::new(),
        }
    }

    /// The span itself (to instrument the call with).
    pub(crate) fn span(&self) -> &Span {
        &self.span
    }

    /// Describes the tool the request resolved to: its name, its layer (`mcp` for an MCP
    /// server's tool), its library's SHA-256 (asked for only when the span is recorded), its
    /// risk and whether it runs in a worker.
    pub(crate) fn resolved<'a>(
        &self,
        tool: &Arc<str>,
        layer: &str,
        sha256: impl FnOnce() -> Option<&'a str>,
        risk: RiskLevel,
        isolated: bool,
    ) {
        let _ = self.tool.set(tool.clone());
        if self.span.is_disabled() {
            return;
        }
        self.span.record(TOOL_LAYER, masked(layer));
        if let Some(sha256) = sha256() {
            self.span.record(LIBRARY_SHA256, sha256);
        }
        self.span.record(TOOL_RISK, risk.as_str());
        self.span.record(TOOL_ISOLATED, isolated);
    }

    /// Records how the call ended, on the span and in the metrics.
    pub(crate) fn ended(&self, outcome: Result<(), &ToolError>) {
        if !self.span.is_disabled() {
            match outcome {
                Ok(()) => {
                    self.span.record(CALL_OUTCOME, "ok");
                }
                Err(e) => {
                    self.span.record(CALL_OUTCOME, "error");
                    self.span.record(ERROR_TYPE, e.kind().as_str());
                    self.span.record(OTEL_STATUS_CODE, "error");
                    self.span
                        .record(OTEL_STATUS_DESCRIPTION, masked(e.message()));
                }
            }
        }
        if metrics::enabled() {
            let tool = self.tool.get().map_or("(unresolved)", |t| &**t);
            let kind = outcome.err().map(|e| e.kind().as_str());
            metrics::call_ended(&masked(tool), kind, self.started.elapsed());
        }
    }
}

/// A step of a call, as a child of its span: `approval`, `validation`, `execute` (the
/// plugin's, one per attempt) or an extension point's name.
pub(crate) fn step(name: &'static str) -> Span {
    tracing::info_span!(target: TARGET, "step", { OTEL_NAME } = name)
}

/// The span of one attempt of the plugin's `execute`.
pub(crate) fn execute(attempt: u32) -> Span {
    tracing::info_span!(target: TARGET, "execute", { ATTEMPT } = attempt)
}

/// A retry, as an event of the call's span: the error kind it follows, and the attempt next.
pub(crate) fn retrying(kind: &str, next_attempt: u32) {
    let attempt = next_attempt;
    tracing::event!(target: TARGET, tracing::Level::INFO, { ERROR_TYPE } = kind, { ATTEMPT } = attempt, "retry");
}

/// A breaker's change of state, as an event of the call's span.
pub(crate) fn breaker_moved(tool: &str, from: &str, to: &str) {
    metrics::breaker(tool, to);
    let tool = masked(tool);
    tracing::event!(target: TARGET, tracing::Level::INFO, { GEN_AI_TOOL_NAME } = tool, from, to, "circuit breaker");
}
