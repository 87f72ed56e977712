//! The process's metrics, read as Prometheus text (OpenMetrics) by [`render`]: tool calls,
//! their failures by kind and their durations per tool, library reloads and load failures,
//! and MCP requests by method. Off until [`enable`] (a library user pays nothing); `toolhost
//! serve-mcp --http` turns them on and serves them at `/metrics`.
//!
//! | metric | labels |
//! |---|---|
//! | `toolhost_tool_calls_total` | `tool`, `outcome` (`ok`, `error`) |
//! | `toolhost_tool_failures_total` | `tool`, `kind` (the error kind) |
//! | `toolhost_tool_call_duration_seconds` (histogram) | `tool` |
//! | `toolhost_reloads_total` | `event` (`loaded`, `reloaded`, `removed`, `failed`) |
//! | `toolhost_mcp_requests_total` | `method` |
//! | `toolhost_breaker_state` (gauge: 0 closed, 1 half open, 2 open) | `tool` |
//! | `toolhost_approvals_total` | `decision` (`allowed`, `denied`) |
//! | `toolhost_model_tokens_total` | `model`, `type` (`input`, `output`) |

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = Vec<(&'static str, String)>;
type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

struct Metrics {
    registry: Registry,
    calls: Family<Labels, Counter>,
    failures: Family<Labels, Counter>,
    durations: Histograms,
    reloads: Family<Labels, Counter>,
    mcp_requests: Family<Labels, Counter>,
    breakers: Family<Labels, Gauge>,
    approvals: Family<Labels, Counter>,
    tokens: Family<Labels, Counter>,
    sessions: Counter,
}

static ENABLED: AtomicBool = AtomicBool::new(false);

static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let mut registry = Registry::with_prefix("toolhost");
    let calls = Family::<Labels, Counter>::default();
    registry.register(
        "tool_calls",
        "Tool calls, by tool and outcome",
        calls.clone(),
    );
    let failures = Family::<Labels, Counter>::default();
    let help = "Failed tool calls, by tool and error kind";
    registry.register("tool_failures", help, failures.clone());
    // 100 µs to about 105 s.
    let durations: Histograms =
        Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.0001, 4.0, 11)));
    let help = "How long tool calls took, by tool";
    registry.register_with_unit(
        "tool_call_duration",
        help,
        prometheus_client::registry::Unit::Seconds,
        durations.clone(),
    );
    let reloads = Family::<Labels, Counter>::default();
    let help = "Library reload events: loaded, reloaded, removed, failed";
    registry.register("reloads", help, reloads.clone());
    let mcp_requests = Family::<Labels, Counter>::default();
    let help = "MCP requests served, by method";
    registry.register("mcp_requests", help, mcp_requests.clone());
    let breakers = Family::<Labels, Gauge>::default();
    let help = "Circuit breaker state by tool: 0 closed, 1 half open, 2 open";
    registry.register("breaker_state", help, breakers.clone());
    let approvals = Family::<Labels, Counter>::default();
    let help = "Approval decisions on tool calls: allowed, denied";
    registry.register("approvals", help, approvals.clone());
    let tokens = Family::<Labels, Counter>::default();
    let help = "Model tokens, by model and type (input, output)";
    registry.register("model_tokens", help, tokens.clone());
    let sessions = Counter::default();
    let help = "MCP sessions started by serve-mcp --http --sessions (Mcp-Session-Id issued)";
    registry.register("mcp_sessions_started", help, sessions.clone());
    Metrics {
        registry,
        calls,
        failures,
        durations,
        reloads,
        mcp_requests,
        breakers,
        approvals,
        tokens,
        sessions,
    }
});

/// Turns the metrics on for the rest of the process.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether the metrics are recorded.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Every metric, as OpenMetrics text ([`CONTENT_TYPE`]).
pub fn render() -> String {
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, &METRICS.registry);
    text
}

/// A tool call ended (`kind`: its error's kind if it failed) after `took`.
pub(crate) fn call_ended(tool: &str, kind: Option<&'static str>, took: Duration) {
    let m = &*METRICS;
    let outcome = if kind.is_some() { "error" } else { "ok" };
    let labels = vec![("tool", tool.to_owned()), ("outcome", outcome.to_owned())];
    m.calls.get_or_create(&labels).inc();
    if let Some(kind) = kind {
        let labels = vec![("tool", tool.to_owned()), ("kind", kind.to_owned())];
        m.failures.get_or_create(&labels).inc();
    }
    let labels = vec![("tool", tool.to_owned())];
    m.durations
        .get_or_create(&labels)
        .observe(took.as_secs_f64());
}

/// A library was loaded, reloaded or removed, or failed to load (`event`).
pub fn reloaded(event: &'static str) {
    if enabled() {
        let labels = vec![("event", event.to_owned())];
        METRICS.reloads.get_or_create(&labels).inc();
    }
}

/// An MCP request of `method` was served.
pub fn mcp_request(method: &str) {
    if enabled() {
        let labels = vec![("method", method.to_owned())];
        METRICS.mcp_requests.get_or_create(&labels).inc();
    }
}

/// An MCP session was started (a client's `initialize` under `--sessions`).
pub fn mcp_session_started() {
    if enabled() {
        METRICS.sessions.inc();
    }
}

/// A tool's circuit breaker is now in state `to` (`closed`, `half_open`, `open`).
pub(crate) fn breaker(tool: &str, to: &str) {
    if enabled() {
        let value = match to {
            "open" => 2,
            "half_open" => 1,
            _ => 0,
        };
        let labels = vec![("tool", super::masked(tool))];
        METRICS.breakers.get_or_create(&labels).set(value);
    }
}

/// A call's approval was decided.
pub(crate) fn approval(allowed: bool) {
    if enabled() {
        let decision = if allowed { "allowed" } else { "denied" };
        let labels = vec![("decision", decision.to_owned())];
        METRICS.approvals.get_or_create(&labels).inc();
    }
}

/// A model request of `model` used `input` and `output` tokens.
pub(crate) fn tokens(model: &str, input: u64, output: u64) {
    if enabled() {
        let model = super::masked(model);
        for (kind, n) in [("input", input), ("output", output)] {
            let labels = vec![("model", model.clone()), ("type", kind.to_owned())];
            METRICS.tokens.get_or_create(&labels).inc_by(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_failures_and_durations_are_rendered() {
        enable();
        call_ended("metrics_probe", None, Duration::from_millis(3));
        call_ended("metrics_probe", Some("timeout"), Duration::from_secs(2));
        reloaded("reloaded");
        mcp_request("tools/call");
        breaker("metrics_probe", "open");
        approval(false);
        tokens("probe-model", 12, 5);
        let text = render();
        let ok = r#"toolhost_tool_calls_total{tool="metrics_probe",outcome="ok"} 1"#;
        assert!(text.contains(ok), "{text}");
        let failed = r#"toolhost_tool_failures_total{tool="metrics_probe",kind="timeout"} 1"#;
        assert!(text.contains(failed), "{text}");
        let count = r#"toolhost_tool_call_duration_seconds_count{tool="metrics_probe"} 2"#;
        assert!(text.contains(count), "{text}");
        assert!(text.contains(r#"toolhost_reloads_total{event="reloaded"}"#));
        assert!(text.contains(r#"toolhost_mcp_requests_total{method="tools/call"}"#));
        assert!(text.contains(r#"toolhost_breaker_state{tool="metrics_probe"} 2"#));
        assert!(text.contains(r#"toolhost_approvals_total{decision="denied"}"#));
        let input = r#"toolhost_model_tokens_total{model="probe-model",type="input"} 12"#;
        assert!(text.contains(input), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
