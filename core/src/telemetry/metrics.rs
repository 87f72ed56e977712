//! The process's metrics, kept by one OpenTelemetry meter: tool calls, their failures by kind
//! and their durations per tool, library reloads and load failures, MCP requests and
//! sessions, circuit breakers, approvals and model tokens (the names are in
//! [`names`](super::names), `METRIC_*`). Off until [`enable`] (a library user pays nothing);
//! `toolhost serve-mcp --http` turns them on and serves them at `/metrics` ([`render`]), and
//! a binary that exports them over OTLP turns them on with its exporter ([`enable_exporting`]).
//!
//! Why the OpenTelemetry meter and not a Prometheus registry read by observable instruments:
//! OpenTelemetry has no observable histogram, so the two duration and token histograms would
//! have been counted twice; here each measurement is recorded once, and both the OTLP export
//! and `/metrics` (a [`ManualReader`] rendered by `openmetrics.rs`) read the same aggregates.
//! Recording costs the same as before on the call path (one map look-up per instrument,
//! measured by `cargo bench -p toolhost-tests --bench telemetry`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::Duration;

use opentelemetry::metrics::{
    Counter, Gauge, Histogram, MeterProvider as _, ObservableUpDownCounter,
};
use opentelemetry::{KeyValue, StringValue};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    InstrumentKind, ManualReader, MeterProviderBuilder, Pipeline, SdkMeterProvider, Temporality,
};
use opentelemetry_sdk::Resource;

use super::names::*;

/// The most distinct tool names the metrics record (each a `gen_ai.tool.name` label, the
/// series multiplied by the other attributes): past it, a new name is recorded as
/// [`UNKNOWN_TOOL`] and counted in `toolhost.metrics.labels.dropped`.
pub const MAX_TOOL_LABELS: usize = 1000;

/// The `gen_ai.tool.name` of a measurement whose tool is not one the profile serves (or past
/// [`MAX_TOOL_LABELS`]).
pub const UNKNOWN_TOOL: &str = "unknown";

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The buckets of [`METRIC_TOOL_CALL_DURATION`]: 100 µs to about 105 s, ×4.
const DURATION_BUCKETS: [f64; 11] = [
    0.0001, 0.0004, 0.0016, 0.0064, 0.0256, 0.1024, 0.4096, 1.6384, 6.5536, 26.2144, 104.8576,
];
/// The buckets of [`METRIC_MCP_SERVER_OPERATION_DURATION`] the MCP conventions advise.
const MCP_DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];
/// The buckets of [`METRIC_GEN_AI_TOKEN_USAGE`] the GenAI conventions advise.
const TOKEN_BUCKETS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

struct Metrics {
    provider: SdkMeterProvider,
    scrape: Scrape,
    calls: Counter<u64>,
    failures: Counter<u64>,
    durations: Histogram<f64>,
    reloads: Counter<u64>,
    mcp_requests: Counter<u64>,
    mcp_durations: Histogram<f64>,
    sessions_started: Counter<u64>,
    breakers: Gauge<i64>,
    approvals: Counter<u64>,
    tokens: Histogram<u64>,
    dropped_labels: Counter<u64>,
    /// The tool names recorded so far (masked), at most [`MAX_TOOL_LABELS`].
    tools: RwLock<HashSet<Arc<str>>>,
    /// Kept so its callback stays registered.
    _sessions_open: ObservableUpDownCounter<i64>,
}

static METRICS: OnceLock<Metrics> = OnceLock::new();

/// What counts the open MCP sessions of a server: `None` once the server is gone.
type SessionCount = Box<dyn Fn() -> Option<u64> + Send + Sync>;
static OPEN_SESSIONS: Mutex<Vec<SessionCount>> = Mutex::new(Vec::new());

/// The reader `/metrics` collects with (a [`ManualReader`] the provider also holds).
#[derive(Debug, Clone)]
struct Scrape(Arc<ManualReader>);

impl MetricReader for Scrape {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline);
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

impl Metrics {
    /// The instruments of a provider made by `builder` and `/metrics`' reader.
    fn new(builder: MeterProviderBuilder) -> Self {
        let scrape = Scrape(Arc::new(ManualReader::builder().build()));
        let provider = builder.with_reader(scrape.clone()).build();
        let meter = provider.meter("toolhost");
        let counter = |name: &'static str, help: &'static str| {
            meter.u64_counter(name).with_description(help).build()
        };
        let sessions_open = meter
            .i64_observable_up_down_counter(METRIC_MCP_SESSIONS_OPEN)
            .with_description("MCP sessions open under serve-mcp --http --sessions")
            .with_callback(|observer| observer.observe(open_sessions(), &[]))
            .build();
        Self {
            calls: counter(METRIC_TOOL_CALLS, "Tool calls, by tool and outcome"),
            failures: counter(
                METRIC_TOOL_FAILURES,
                "Failed tool calls, by tool and error kind",
            ),
            durations: meter
                .f64_histogram(METRIC_TOOL_CALL_DURATION)
                .with_description("How long tool calls took, by tool")
                .with_unit("s")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            reloads: counter(
                METRIC_RELOADS,
                "Library events: loaded, reloaded, removed, failed",
            ),
            mcp_requests: counter(METRIC_MCP_REQUESTS, "MCP requests served, by method"),
            mcp_durations: meter
                .f64_histogram(METRIC_MCP_SERVER_OPERATION_DURATION)
                .with_description("How long MCP requests took to serve, by method")
                .with_unit("s")
                .with_boundaries(MCP_DURATION_BUCKETS.to_vec())
                .build(),
            sessions_started: counter(
                METRIC_MCP_SESSIONS_STARTED,
                "MCP sessions started by serve-mcp --http --sessions (Mcp-Session-Id issued)",
            ),
            breakers: meter
                .i64_gauge(METRIC_BREAKER_STATE)
                .with_description("Circuit breaker state by tool: 0 closed, 1 half open, 2 open")
                .build(),
            approvals: counter(
                METRIC_APPROVALS,
                "Approval decisions on tool calls: allowed, denied",
            ),
            tokens: meter
                .u64_histogram(METRIC_GEN_AI_TOKEN_USAGE)
                .with_description("Tokens of each model request, by model and token type")
                .with_unit("{token}")
                .with_boundaries(TOKEN_BUCKETS.to_vec())
                .build(),
            dropped_labels: counter(
                METRIC_DROPPED_LABELS,
                "Measurements whose tool name was recorded as unknown: the bound on distinct tool names was reached",
            ),
            tools: RwLock::default(),
            _sessions_open: sessions_open,
            provider,
            scrape,
        }
    }
}

/// The sum of the open sessions of every server still there.
fn open_sessions() -> i64 {
    let mut sources = OPEN_SESSIONS.lock().unwrap_or_else(|e| e.into_inner());
    let mut total = 0;
    sources.retain(|count| match count() {
        Some(n) => {
            total += n;
            true
        }
        None => false,
    });
    i64::try_from(total).unwrap_or(i64::MAX)
}

/// Turns the metrics on for the rest of the process (read by [`render`]).
pub fn enable() {
    METRICS.get_or_init(|| Metrics::new(SdkMeterProvider::builder()));
}

/// Turns the metrics on with `reader` (an OTLP exporter's periodic reader) exporting them too,
/// its measurements described by `resource`. False when they were on already: they are then
/// not exported, as the reader could not be added.
pub fn enable_exporting(reader: impl MetricReader, resource: Resource) -> bool {
    let mut added = false;
    METRICS.get_or_init(|| {
        added = true;
        let builder = SdkMeterProvider::builder().with_reader(reader);
        Metrics::new(builder.with_resource(resource))
    });
    added
}

/// Exports what is left (at the end of a command) and stops the metrics' readers.
pub fn shutdown() -> OTelSdkResult {
    match METRICS.get() {
        Some(m) => m.provider.shutdown(),
        None => Ok(()),
    }
}

/// Whether the metrics are recorded.
pub fn enabled() -> bool {
    METRICS.get().is_some()
}

/// Every metric, as OpenMetrics text ([`CONTENT_TYPE`]).
pub fn render() -> String {
    let mut collected = ResourceMetrics::default();
    if let Some(m) = METRICS.get() {
        if let Err(e) = m.scrape.collect(&mut collected) {
            tracing::warn!("collecting the metrics failed: {e}");
        }
    }
    super::openmetrics::render(&collected)
}

/// Counts the open MCP sessions of a server with `count` (rmcp's session manager's own
/// count), until it answers `None` (the server is gone).
pub fn observe_open_sessions(count: impl Fn() -> Option<u64> + Send + Sync + 'static) {
    let mut sources = OPEN_SESSIONS.lock().unwrap_or_else(|e| e.into_inner());
    sources.push(Box::new(count));
}

fn text(value: &str) -> StringValue {
    StringValue::from(value.to_owned())
}

impl Metrics {
    /// The `gen_ai.tool.name` attribute of `tool` (masked): its own value while fewer than
    /// [`MAX_TOOL_LABELS`] names were recorded (or it was one of them), else
    /// [`UNKNOWN_TOOL`], counted as dropped.
    fn tool_label(&self, tool: &str) -> KeyValue {
        let tool = super::masked(tool);
        let known = |tools: &HashSet<Arc<str>>| tools.get(tool.as_str()).cloned();
        let read = self.tools.read().unwrap_or_else(|e| e.into_inner());
        let value = match known(&read) {
            Some(value) => value,
            None => {
                drop(read);
                let mut tools = self.tools.write().unwrap_or_else(|e| e.into_inner());
                match known(&tools) {
                    Some(value) => value,
                    None if tools.len() < MAX_TOOL_LABELS || tool == UNKNOWN_TOOL => {
                        let value = Arc::<str>::from(tool);
                        tools.insert(value.clone());
                        value
                    }
                    None => {
                        self.dropped_labels.add(1, &[]);
                        Arc::from(UNKNOWN_TOOL)
                    }
                }
            }
        };
        KeyValue::new(GEN_AI_TOOL_NAME, StringValue::from(value))
    }
}

/// A tool call ended (`kind`: its error's kind if it failed) after `took`.
pub(crate) fn call_ended(tool: &str, kind: Option<&'static str>, took: Duration) {
    let Some(m) = METRICS.get() else { return };
    let tool = m.tool_label(tool);
    let outcome = if kind.is_some() { "error" } else { "ok" };
    m.calls
        .add(1, &[tool.clone(), KeyValue::new(CALL_OUTCOME, outcome)]);
    if let Some(kind) = kind {
        m.failures
            .add(1, &[tool.clone(), KeyValue::new(ERROR_TYPE, kind)]);
    }
    m.durations.record(took.as_secs_f64(), &[tool]);
}

/// A library was loaded, reloaded or removed, or failed to load (`event`).
pub fn reloaded(event: &'static str) {
    if let Some(m) = METRICS.get() {
        m.reloads.add(1, &[KeyValue::new(RELOAD_EVENT, event)]);
    }
}

/// An MCP request of `method` was served in `took` (of `tool`, for `tools/call`: a tool the
/// profile serves, else [`UNKNOWN_TOOL`], never a name as a client sent it), failing with
/// `error` (a JSON-RPC error code, or `tool_error`) if it did. Every value is masked.
pub fn mcp_request(method: &'static str, tool: Option<&str>, error: Option<&str>, took: Duration) {
    let Some(m) = METRICS.get() else { return };
    let method = KeyValue::new(MCP_METHOD_NAME, method);
    m.mcp_requests.add(1, std::slice::from_ref(&method));
    let mut attributes = vec![method];
    attributes.extend(tool.map(|t| m.tool_label(t)));
    attributes.extend(error.map(|e| KeyValue::new(ERROR_TYPE, text(&super::masked(e)))));
    m.mcp_durations.record(took.as_secs_f64(), &attributes);
}

/// An MCP session was started (a client's `initialize` under `--sessions`).
pub fn mcp_session_started() {
    if let Some(m) = METRICS.get() {
        m.sessions_started.add(1, &[]);
    }
}

/// A tool's circuit breaker is now in state `to` (`closed`, `half_open`, `open`).
pub(crate) fn breaker(tool: &str, to: &str) {
    if let Some(m) = METRICS.get() {
        let value = match to {
            "open" => 2,
            "half_open" => 1,
            _ => 0,
        };
        m.breakers.record(value, &[m.tool_label(tool)]);
    }
}

/// A call's approval was decided.
pub(crate) fn approval(allowed: bool) {
    if let Some(m) = METRICS.get() {
        let decision = if allowed { "allowed" } else { "denied" };
        m.approvals
            .add(1, &[KeyValue::new(APPROVAL_DECISION, decision)]);
    }
}

/// A model request of `model` used `input` and `output` tokens.
pub(crate) fn tokens(model: &str, input: u64, output: u64) {
    if let Some(m) = METRICS.get() {
        let model = KeyValue::new(GEN_AI_REQUEST_MODEL, text(&super::masked(model)));
        for (kind, n) in [("input", input), ("output", output)] {
            let attributes = [
                KeyValue::new(GEN_AI_OPERATION_NAME, CHAT),
                model.clone(),
                KeyValue::new(GEN_AI_TOKEN_TYPE, kind),
            ];
            m.tokens.record(n, &attributes);
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
        mcp_request(
            "tools/call",
            Some("metrics_probe"),
            None,
            Duration::from_millis(30),
        );
        breaker("metrics_probe", "open");
        approval(false);
        tokens("probe-model", 12, 5);
        observe_open_sessions(|| Some(3));
        let text = render();
        for line in [
            r#"toolhost_tool_calls_total{gen_ai_tool_name="metrics_probe",toolhost_call_outcome="ok"} 1"#,
            r#"toolhost_tool_failures_total{error_type="timeout",gen_ai_tool_name="metrics_probe"} 1"#,
            r#"toolhost_tool_call_duration_seconds_count{gen_ai_tool_name="metrics_probe"} 2"#,
            r#"toolhost_tool_call_duration_seconds_bucket{gen_ai_tool_name="metrics_probe",le="0.0064"} 1"#,
            r#"toolhost_tool_call_duration_seconds_bucket{gen_ai_tool_name="metrics_probe",le="+Inf"} 2"#,
            "# TYPE toolhost_tool_call_duration_seconds histogram",
            "# UNIT toolhost_tool_call_duration_seconds seconds",
            r#"toolhost_reloads_total{toolhost_reload_event="reloaded"} 1"#,
            r#"toolhost_mcp_requests_total{mcp_method_name="tools/call"} 1"#,
            r#"mcp_server_operation_duration_seconds_bucket{gen_ai_tool_name="metrics_probe",mcp_method_name="tools/call",le="0.05"} 1"#,
            r#"toolhost_breaker_state{gen_ai_tool_name="metrics_probe"} 2"#,
            r#"toolhost_approvals_total{toolhost_approval_decision="denied"} 1"#,
            r#"gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_request_model="probe-model",gen_ai_token_type="input"} 12"#,
            "# TYPE toolhost_mcp_sessions_open gauge",
            "toolhost_mcp_sessions_open 3",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn tool_names_past_the_bound_are_unknown_and_counted_as_dropped() {
        // A meter of its own: the process's is shared with the other tests.
        let m = Metrics::new(SdkMeterProvider::builder());
        for i in 0..MAX_TOOL_LABELS + 5 {
            m.calls.add(1, &[m.tool_label(&format!("tool_{i}"))]);
        }
        m.calls.add(1, &[m.tool_label("tool_0")]);
        let mut collected = ResourceMetrics::default();
        m.scrape.collect(&mut collected).expect("collect");
        let text = crate::telemetry::openmetrics::render(&collected);
        let series = text
            .lines()
            .filter(|l| l.starts_with("toolhost_tool_calls_total{"))
            .count();
        assert_eq!(series, MAX_TOOL_LABELS + 1, "the names, and `unknown`");
        for line in [
            r#"toolhost_tool_calls_total{gen_ai_tool_name="unknown"} 5"#,
            r#"toolhost_tool_calls_total{gen_ai_tool_name="tool_0"} 2"#,
            "toolhost_metrics_labels_dropped_total 5",
        ] {
            assert!(text.contains(line), "{line} missing");
        }
        assert!(!text.contains(&format!("tool_{MAX_TOOL_LABELS}\"")));
    }
}
