//! The resolved settings of the tables that apply to every tool: `[calls]` backoff,
//! `[breaker]`, `[audit]`, `[isolation]` and `[telemetry]`, each with its default.

use std::time::Duration;

/// How long to wait before each retry (`[calls] backoff_ms`, `backoff_max_ms`): the first
/// delay, doubled per retry up to the largest, with jitter.
///
/// ```
/// use std::time::Duration;
/// use toolhost::config::Backoff;
///
/// let backoff = Backoff::default(); // 200 ms, at most 10 s
/// assert_eq!(backoff.delay(1, 1.0), Duration::from_millis(200));
/// assert_eq!(backoff.delay(3, 1.0), Duration::from_millis(800));
/// assert_eq!(backoff.delay(3, 0.0), Duration::from_millis(400)); // half, with no jitter drawn
/// assert_eq!(backoff.delay(30, 1.0), Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay before the first retry. Default 200 ms.
    pub first: Duration,
    /// The longest delay. Default 10 s.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            first: Duration::from_millis(200),
            max: Duration::from_secs(10),
        }
    }
}

impl Backoff {
    /// The delay before retry number `retry` (1 for the first retry; 0 counts as 1):
    /// `first · 2^(retry-1)`, at most `max`, then scaled by jitter ("equal jitter"): `jitter`,
    /// a number the caller draws in `0.0..=1.0`, picks a delay between half that and all of it,
    /// so retries of many calls that failed together spread out.
    pub fn delay(&self, retry: u32, jitter: f64) -> Duration {
        let mut delay = self.first.min(self.max);
        for _ in 1..retry {
            if delay >= self.max {
                break;
            }
            delay = delay.saturating_mul(2).min(self.max);
        }
        let jitter = if jitter.is_nan() {
            0.0
        } else {
            jitter.clamp(0.0, 1.0)
        };
        delay / 2 + (delay / 2).mul_f64(jitter)
    }
}

/// The circuit breaker of each tool (`[breaker]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerSettings {
    /// Failures of the infrastructure in a row (not the tool saying no) that open the breaker.
    /// Default 5.
    pub failures: u32,
    /// How long an open breaker refuses calls before it lets probes through. Default 60 s.
    pub cooldown: Duration,
    /// Probe calls let through once the cool-down is over; if they succeed, the breaker closes.
    /// Default 2.
    pub half_open_calls: u32,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        Self {
            failures: 5,
            cooldown: Duration::from_secs(60),
            half_open_calls: 2,
        }
    }
}

/// The audit log of calls (`[audit]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditSettings {
    /// Whether each call is written to the audit log. Default `true`.
    pub enabled: bool,
    /// Whether each audit record is flushed to the disk before the call goes on. Default
    /// `false`.
    pub fsync: bool,
    /// Whether a call whose record cannot be written is refused (`true`), or runs with the
    /// failure reported to its caller (`false`). `None` when the file does not say: the
    /// command's default applies (on for `serve-mcp`, off otherwise).
    pub required: Option<bool>,
}

impl Default for AuditSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            fsync: false,
            required: None,
        }
    }
}

/// The least `[isolation] memory_mb` (`RLIMIT_AS`) a worker process starts and answers a call
/// with: the `toolhost` binary, its runtime's threads, the sandbox and a small library need this
/// much address space. Measured with a debug build serving the test fixtures, sandboxed (the
/// `crashy` fixture through `toolhost call`): on 2026-12-02 it first answered at 61 to 64 MiB,
/// and at 65 to 66 MiB once the telemetry crates were linked in (below, a thread of the plugin's
/// runtime cannot start); 96 leaves room for a plugin's own allocations and for the binary to
/// grow. A smaller value is refused when the configuration is read.
pub const MIN_WORKER_MEMORY_MB: u64 = 96;

/// The limits of a sandboxed worker when neither a grant (`memory:MB`, `cpu:SECONDS`,
/// `tasks:N`) nor `[isolation]` sets them: chosen so that a worker serving the examples and
/// the test fixtures never meets them (a debug `toolhost` worker runs in about 70 MiB of
/// address space and 10 threads), while an allocation of gigabytes, a thread or fork bomb and
/// a spin end as the call's error.
pub mod sandbox_defaults {
    /// Memory, in MiB: `RLIMIT_AS` of the worker, and the memory cgroup's limit where one is
    /// made.
    pub const MEMORY_MB: u64 = 1024;
    /// CPU time over a worker's life, in seconds (`RLIMIT_CPU`): a worker that used it up is
    /// replaced by a new one at the next call.
    pub const CPU_SECONDS: u64 = 600;
    /// Threads and processes of the worker together (the pids cgroup's limit).
    pub const TASKS: u64 = 256;
    // No default for CPUs at once: a worker in a cpu cgroup of its own (v1), with or without
    // a quota, took about 0.1 ms more per call under load (1.7 to 1.9x the round trip, load
    // average 10; BENCHMARKS.md), so the rate is a grant a user asks for (`cpus:N`), and CPU
    // time is bounded by `CPU_SECONDS`.
}

/// How long a library's constructor and metadata read may take by default (`[limits]
/// init_seconds`): 10 s.
pub const DEFAULT_INIT_TIMEOUT: Duration = Duration::from_secs(10);

/// How isolated tools run: their limits, and how long a cancelled call may take to stop.
///
/// ```
/// use std::time::Duration;
/// let settings = toolhost::IsolationSettings::default();
/// assert_eq!(settings.memory_mb, None);
/// assert_eq!(settings.grace, Duration::from_millis(1000));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsolationSettings {
    /// The most address space a worker may use, in MiB (`RLIMIT_AS`); `None`: no limit.
    pub memory_mb: Option<u64>,
    /// The most CPU time a worker may use over its life, in seconds (`RLIMIT_CPU`); `None`:
    /// no limit.
    pub cpu_seconds: Option<u64>,
    /// How long a call cancelled at its deadline (or by the user) may go on before its worker
    /// is killed. Default 1 s.
    pub grace: Duration,
    /// The most threads and processes a worker may have together (a pids cgroup, where the
    /// host can make one); `None`: no limit.
    pub tasks: Option<u64>,
    /// How many CPUs' worth of time a worker may use at once (a cpu cgroup's quota, where the
    /// host can make one; the `cpus:N` grant); `None`: no limit.
    pub cpus: Option<u64>,
    /// The sandbox its worker runs in ([`Config::sandbox`](super::Config::sandbox)); `None`:
    /// none (the default of a bare `IsolationSettings`; the host sandboxes every isolated tool
    /// whose configuration does not say `sandbox = "off"`).
    pub sandbox: Option<std::sync::Arc<super::SandboxPolicy>>,
    /// The secrets it may receive (`secret:KEY` grants, and for an installed package the
    /// secrets its manifest declares): a placeholder of any other key stays as it is, and the
    /// call is told which grant would fill it.
    pub secrets: Vec<String>,
    /// The host's environment variables its worker sees besides the few every worker gets
    /// (`env:NAME` grants).
    pub env: Vec<String>,
}

impl Default for IsolationSettings {
    fn default() -> Self {
        Self {
            memory_mb: None,
            cpu_seconds: None,
            grace: Duration::from_millis(1000),
            tasks: None,
            cpus: None,
            sandbox: None,
            secrets: Vec::new(),
            env: Vec::new(),
        }
    }
}

/// The OpenTelemetry export as `[telemetry]` in `usr/toolhost.toml` sets it: each value is
/// the one of the standard variable named beside it, which wins over the file when set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TelemetrySettings {
    /// `endpoint`: `OTEL_EXPORTER_OTLP_ENDPOINT`, the base URL (`/v1/traces` and `/v1/metrics`
    /// are appended).
    pub endpoint: Option<String>,
    /// `service_name`: `OTEL_SERVICE_NAME`.
    pub service_name: Option<String>,
    /// `traces_exporter`: `OTEL_TRACES_EXPORTER`, `"otlp"` or `"none"`.
    pub traces_exporter: Option<String>,
    /// `metrics_exporter`: `OTEL_METRICS_EXPORTER`, `"otlp"` or `"none"`.
    pub metrics_exporter: Option<String>,
    /// `metric_export_interval_ms`: `OTEL_METRIC_EXPORT_INTERVAL`, in milliseconds.
    pub metric_export_interval_ms: Option<u64>,
    /// `[telemetry.headers]`: `OTEL_EXPORTER_OTLP_HEADERS`, sent with each export.
    pub headers: Vec<(String, String)>,
}

impl TelemetrySettings {
    /// The file's value for the standard variable `name`, as that variable's text (headers
    /// as `key=value,…`); `None` when the file does not set it.
    pub fn var(&self, name: &str) -> Option<String> {
        match name {
            "OTEL_EXPORTER_OTLP_ENDPOINT" => self.endpoint.clone(),
            "OTEL_SERVICE_NAME" => self.service_name.clone(),
            "OTEL_TRACES_EXPORTER" => self.traces_exporter.clone(),
            "OTEL_METRICS_EXPORTER" => self.metrics_exporter.clone(),
            "OTEL_METRIC_EXPORT_INTERVAL" => {
                self.metric_export_interval_ms.map(|ms| ms.to_string())
            }
            "OTEL_EXPORTER_OTLP_HEADERS" if !self.headers.is_empty() => Some(
                self.headers
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            _ => None,
        }
    }
}
