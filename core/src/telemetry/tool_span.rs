//! A tool call's span, `execute_tool {tool}`, with its attributes, and the call's metrics
//! when it ends.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use tracing::field::{Empty, Field, Value};
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
    ///
    /// What is known of the call goes into the span as it is made: each later
    /// [`Span::record`] is a lookup and a lock in every layer that records the span.
    pub(crate) fn start(request: &str) -> Self {
        let span = if tracing::enabled!(target: TARGET, tracing::Level::INFO) {
            let request = masked(request);
            let (name, method) = match request.split_once(':') {
                Some((name, method)) => (name, Some(method)),
                None => (request.as_str(), None),
            };
            let call_id = CALL_ID.try_with(|id| masked(id)).ok();
            tracing::info_span!(
                target: TARGET,
                "execute_tool",
                { OTEL_NAME } = format!("{EXECUTE_TOOL} {name}"),
                { GEN_AI_OPERATION_NAME } = EXECUTE_TOOL,
                { GEN_AI_TOOL_NAME } = name,
                { GEN_AI_TOOL_CALL_ID } = call_id.as_deref(),
                { TOOL_METHOD } = method,
                { TOOL_LAYER } = Empty,
                { LIBRARY_SHA256 } = Empty,
                { TOOL_RISK } = Empty,
                { TOOL_ISOLATED } = Empty,
                { CALL_OUTCOME } = Empty,
                { ERROR_TYPE } = Empty,
                { OTEL_STATUS_CODE } = Empty,
                { OTEL_STATUS_DESCRIPTION } = Empty,
            )
        } else {
            Span::none()
        };
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
        if self.span.is_disabled() {
            return;
        }
        let layer = masked(&layer());
        let sha256 = sha256();
        self.record(&[
            (TOOL_LAYER, Some(&layer.as_str() as &dyn Value)),
            (LIBRARY_SHA256, sha256.as_ref().map(|s| s as &dyn Value)),
            (TOOL_RISK, Some(&risk.as_str() as &dyn Value)),
            (TOOL_ISOLATED, Some(&isolated as &dyn Value)),
        ]);
    }

    /// Records `values` (fields of [`start`](Self::start)'s span) at once: one visit of each
    /// layer, not one a field.
    fn record<const N: usize>(&self, values: &[(&str, Option<&dyn Value>); N]) {
        let Some(meta) = self.span.metadata() else {
            return;
        };
        let fields = meta.fields();
        let named: [(Field, Option<&dyn Value>); N] = std::array::from_fn(|i| {
            let (name, value) = values[i];
            (fields.field(name).expect("a field of the span"), value)
        });
        let pairs: [(&Field, Option<&dyn Value>); N] =
            std::array::from_fn(|i| (&named[i].0, named[i].1));
        self.span.record_all(&fields.value_set(&pairs));
    }

    /// Records how the call ended, on the span and in the metrics.
    pub(crate) fn ended(&self, outcome: Result<(), &ToolError>) {
        if !self.span.is_disabled() {
            match outcome {
                Ok(()) => {
                    self.span.record(CALL_OUTCOME, "ok");
                }
                Err(e) => {
                    let description = masked(e.message());
                    self.record(&[
                        (CALL_OUTCOME, Some(&"error" as &dyn Value)),
                        (ERROR_TYPE, Some(&e.kind().as_str() as &dyn Value)),
                        (OTEL_STATUS_CODE, Some(&"error" as &dyn Value)),
                        (
                            OTEL_STATUS_DESCRIPTION,
                            Some(&description.as_str() as &dyn Value),
                        ),
                    ]);
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
/// plugin's, one per attempt) or the name of an extension point that has extensions.
pub(crate) fn step(name: &str) -> Span {
    // A field's value is worked out only when the span is enabled.
    tracing::info_span!(target: TARGET, "step", { OTEL_NAME } = masked(name))
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
