//! The cost of tracing a tool call: the full lifecycle of the no-op tool (no extensions, audit
//! off, no runtime, as the `lifecycle` bench's "full lifecycle, no extensions" row) with export
//! off (no subscriber: the spans are disabled; and the CLI's log subscriber, warnings only, as
//! `serve-mcp` runs without an exporter); a call's 4 spans made with the SDK directly, without
//! the lifecycle (the floor of any design on the SDK); the host's spans recorded by a tracer
//! provider without an exporter; and exported over OTLP HTTP/protobuf (the SDK's batch
//! processor, as `toolhost` exports) to the tests' receiver on this machine.
//!
//! Metrics (group `metrics`, after the tracing rows: once on, they stay on for the process):
//! the same lifecycle with the metrics off (no subscriber), then on and exported over OTLP
//! HTTP/protobuf every 100 ms to the tests' receiver (`otlp_receiver.py`, on the real
//! protobuf classes) on this machine, as `toolhost serve-mcp --http` with
//! `OTEL_METRICS_EXPORTER=otlp` records them (the `/metrics` reader is there too); with
//! `TOOLHOST_BENCH_METRICS_UNEXPORTED=1`, on without an exporter, as `serve-mcp --http` alone.
//!
//! Run with `cargo bench -p toolhost-tests --bench telemetry`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde_json::json;
use toolhost::output::Silent;
use toolhost::{Agent, Host};
use toolhost_tests::{Fixture, TestRoot};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::Layer as _;

/// Polls a future that completes without waiting (every call here does).
fn ready<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// Times `iters` lifecycle calls of `noop`, a fresh agent every 1,000 (made untimed).
fn calls(host: &Arc<Host>, iters: u64, args: &serde_json::Value) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(1000);
        left -= n;
        let agent = Agent::with_output(host.clone(), "A0", "default", Arc::new(Silent)).unwrap();
        let start = Instant::now();
        for _ in 0..n {
            ready(agent.call_tool(black_box("noop"), args.clone())).unwrap();
        }
        total += start.elapsed();
    }
    total
}

/// A call's spans made with `tracer` directly: `execute_tool` and its three steps.
fn sdk_spans(tracer: &opentelemetry_sdk::trace::SdkTracer) {
    use opentelemetry::trace::{Span as _, TraceContextExt as _, Tracer as _};
    use opentelemetry::KeyValue;
    use toolhost::telemetry::names::*;
    let attributes = vec![
        KeyValue::new(GEN_AI_OPERATION_NAME, EXECUTE_TOOL),
        KeyValue::new(GEN_AI_TOOL_NAME, "noop"),
        KeyValue::new(GEN_AI_TOOL_CALL_ID, "call-1"),
        KeyValue::new(TOOL_LAYER, "usr"),
        KeyValue::new(LIBRARY_SHA256, black_box("0".repeat(64))),
        KeyValue::new(TOOL_RISK, "read"),
        KeyValue::new(TOOL_ISOLATED, false),
        KeyValue::new(CALL_OUTCOME, "ok"),
    ];
    let call = tracer
        .span_builder(format!("{EXECUTE_TOOL} {}", black_box("noop")))
        .with_attributes(attributes)
        .start(tracer);
    let context = opentelemetry::Context::new().with_span(call);
    for step in ["validation", "approval", "execute"] {
        let mut span = tracer
            .span_builder(step)
            .with_attributes([KeyValue::new(ATTEMPT, 1)])
            .start_with_context(tracer, &context);
        span.end();
    }
    context.span().end();
}

fn bench(c: &mut Criterion) {
    let root = TestRoot::new();
    root.write("usr/toolhost.toml", "[audit]\nenabled = false\n");
    root.tool("usr", "noop", Fixture::Noop);
    let host = root.host();
    let args = json!({"city": "Paris", "days": 3, "units": "metric"});
    calls(&host, 1, &args);

    let mut group = c.benchmark_group("tracing");
    group.bench_function("export off", |b| {
        b.iter_custom(|iters| calls(&host, iters, &args))
    });

    // The CLI's subscriber when nothing is exported: its log layer, warnings and errors only.
    let logging = tracing::Dispatch::new(
        tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::sink)
                .with_filter(tracing_subscriber::EnvFilter::new("warn")),
        ),
    );
    group.bench_function("export off, the CLI's log subscriber", |b| {
        b.iter_custom(|iters| {
            tracing::dispatcher::with_default(&logging, || calls(&host, iters, &args))
        })
    });

    let recorded = SdkTracerProvider::builder().build();
    // The floor of any design on this SDK: a call's 4 spans (the call's with its 8 attributes,
    // 3 steps with one each) made and ended with the tracer directly, without `tracing` and
    // without the lifecycle.
    let tracer = recorded.tracer("bench");
    group.bench_function("the SDK's 4 spans alone, no lifecycle", |b| {
        b.iter(|| sdk_spans(&tracer))
    });
    toolhost::telemetry::install(Some(&recorded));
    group.bench_function("spans recorded, not exported", |b| {
        b.iter_custom(|iters| calls(&host, iters, &args))
    });

    let (receiver, port) = Receiver::start(&root);
    let exported = export_traces(port);
    toolhost::telemetry::install(Some(&exported));
    group.bench_function("spans exported over OTLP to a local receiver", |b| {
        b.iter_custom(|iters| calls(&host, iters, &args))
    });
    group.finish();
    toolhost::telemetry::install(None);
    if let Err(e) = exported.shutdown() {
        panic!("the last spans were not sent: {e}");
    }
    drop(receiver);

    let mut group = c.benchmark_group("metrics");
    group.bench_function("metrics off", |b| {
        b.iter_custom(|iters| calls(&host, iters, &args))
    });
    // Once on, the metrics stay on: recorded without an exporter is a run of its own.
    let (row, _receiver) = match std::env::var_os("TOOLHOST_BENCH_METRICS_UNEXPORTED") {
        Some(_) => {
            toolhost::telemetry::metrics::enable();
            ("metrics on, not exported (/metrics only)", None)
        }
        None => (
            "metrics on, exported over OTLP every 100 ms",
            Some(export_metrics(&root)),
        ),
    };
    group.bench_function(row, |b| b.iter_custom(|iters| calls(&host, iters, &args)));
    group.finish();
    let _ = toolhost::telemetry::metrics::shutdown();
}

/// The tests' OTLP receiver, killed when dropped.
struct Receiver(std::process::Child);

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Receiver {
    /// Starts the tests' receiver (its decoded lines read and dropped); it and its port.
    fn start(root: &TestRoot) -> (Self, u16) {
        use std::io::BufRead as _;
        let script = root.path().join("otlp_receiver.py");
        let receiver = include_str!("../integration/telemetry/otlp_receiver.py");
        std::fs::write(&script, receiver).expect("the receiver script");
        let mut child = std::process::Command::new(toolhost_tests::peers::otel_python())
            .arg(&script)
            .arg("/dev/null")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("the OTLP receiver");
        let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let port: u16 = first
            .strip_prefix("listening ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the OTLP receiver did not start: {first:?}"));
        // Its decoded lines are read and dropped, so it never waits on a full pipe.
        std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
        // The exporters' client with the workspace's one crypto provider, as `toolhost` does.
        let _ = rustls::crypto::ring::default_provider().install_default();
        (Self(child), port)
    }
}

/// A tracer provider exporting to the receiver on `port` with the SDK's batch processor (its
/// default settings, as `toolhost` builds it).
fn export_traces(port: u16) -> SdkTracerProvider {
    use opentelemetry_otlp::WithExportConfig as _;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(format!("http://127.0.0.1:{port}/v1/traces"))
        .build()
        .expect("the OTLP span exporter");
    SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_id_generator(toolhost::telemetry::SpanIds::default())
        .build()
}

/// Starts the receiver and turns the host's metrics on, exported to it every 100 ms.
fn export_metrics(root: &TestRoot) -> Receiver {
    use opentelemetry_otlp::WithExportConfig as _;
    let (receiver, port) = Receiver::start(root);
    let exporter = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_endpoint(format!("http://127.0.0.1:{port}/v1/metrics"))
        .build()
        .expect("the OTLP metric exporter");
    let reader = opentelemetry_sdk::metrics::PeriodicReader::builder(exporter)
        .with_interval(Duration::from_millis(100))
        .build();
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name("bench")
        .build();
    assert!(toolhost::telemetry::metrics::enable_exporting(
        reader, resource
    ));
    receiver
}

criterion_group!(benches, bench);
criterion_main!(benches);
