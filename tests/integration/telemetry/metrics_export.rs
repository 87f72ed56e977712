//! The metrics exported over OTLP HTTP/protobuf, decoded by the receiver with the real
//! `ExportMetricsServiceRequest`: calls counted per tool, failures by kind, the duration
//! histogram and the service name, asked for by the standard variables or by `[telemetry]`
//! alone; a short `toolhost call` sends its counts when it ends.

use serde_json::{json, Value};

use super::{Receiver, Served};
use crate::mcp_server::root;

/// The data point of metric `name` whose attributes include `with`, the last one received.
fn point<'a>(points: &'a [Value], name: &str, with: &Value) -> Option<&'a Value> {
    points.iter().rev().find(|p| {
        p["name"] == name
            && with
                .as_object()
                .is_some_and(|w| w.iter().all(|(k, v)| &p["attributes"][k] == v))
    })
}

fn value(points: &[Value], name: &str, with: Value) -> Option<i64> {
    point(points, name, &with).and_then(|p| p["value"].as_i64())
}

#[test]
fn serve_mcp_exports_calls_failures_and_durations_per_tool() {
    let root = root();
    let receiver = Receiver::start(root.path());
    let env = [
        ("OTEL_METRICS_EXPORTER", "otlp".to_owned()),
        ("OTEL_TRACES_EXPORTER", "none".to_owned()),
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{}", receiver.port),
        ),
        ("OTEL_METRIC_EXPORT_INTERVAL", "200".to_owned()),
        ("OTEL_SERVICE_NAME", "metrics-probe".to_owned()),
    ];
    let server = Served::start(&root, &["--allow-writes-without-token"], &env);
    for (id, x) in [("1", 1), ("2", 2)] {
        let ok = server.call(id, "echo", json!({ "x": x }), json!({}));
        assert_eq!(ok["isError"], false, "{ok}");
    }
    let failed = server.call("3", "echo:fail", json!({"kind": "timeout"}), json!({}));
    assert_eq!(failed["isError"], true, "{failed}");

    let ok = json!({"gen_ai.tool.name": "echo", "toolhost.call.outcome": "ok"});
    let error = json!({"gen_ai.tool.name": "echo", "toolhost.call.outcome": "error"});
    let timeout = json!({"gen_ai.tool.name": "echo", "error.type": "timeout"});
    let echo = json!({"gen_ai.tool.name": "echo"});
    let requests = json!({"mcp.method.name": "tools/call"});
    let loaded = json!({"toolhost.reload.event": "loaded"});
    // Waits for every count asserted below: the server counts a request once its answer is
    // written, so an export can carry a call's counts before its request's.
    let points = receiver.wait_for_metrics(|points| {
        value(points, "toolhost.tool.calls", ok.clone()) == Some(2)
            && value(points, "toolhost.tool.calls", error.clone()) == Some(1)
            && value(points, "toolhost.tool.failures", timeout.clone()) == Some(1)
            && point(points, "toolhost.tool.call.duration", &echo).is_some_and(|h| h["count"] == 3)
            && value(points, "toolhost.mcp.requests", requests.clone()) == Some(3)
            && value(points, "toolhost.reloads", loaded.clone()).is_some_and(|n| n > 0)
    });
    let calls = point(&points, "toolhost.tool.calls", &ok).expect("the calls");
    assert_eq!(calls["type"], "sum", "{calls:#}");
    assert_eq!(calls["monotonic"], true, "a counter: {calls:#}");
    assert_eq!(calls["temporality"], 2, "cumulative: {calls:#}");
    assert_eq!(calls["service"], "metrics-probe", "{calls:#}");

    let histogram = point(&points, "toolhost.tool.call.duration", &echo).expect("the durations");
    assert_eq!(histogram["type"], "histogram", "{histogram:#}");
    assert_eq!(histogram["unit"], "s", "{histogram:#}");
    assert_eq!(histogram["count"], 3, "{histogram:#}");
    let buckets: Vec<u64> = serde_json::from_value(histogram["bucket_counts"].clone()).unwrap();
    assert_eq!(buckets.iter().sum::<u64>(), 3, "{histogram:#}");
    assert_eq!(histogram["bounds"].as_array().map(Vec::len), Some(11));
}

#[test]
fn toolhost_toml_alone_exports_a_short_call_when_it_ends() {
    let root = root();
    let receiver = Receiver::start(root.path());
    // An interval far longer than the command: only the export at its end can send the count.
    let text = format!(
        "[access]\ndeny = [\"hidden\"]\n[tools.noop]\npolicy = \"ask\"\n\n[telemetry]\n\
         endpoint = \"http://127.0.0.1:{}\"\nservice_name = \"from-the-file\"\n\
         traces_exporter = \"none\"\nmetrics_exporter = \"otlp\"\n\
         metric_export_interval_ms = 600000\n",
        receiver.port
    );
    root.write("usr/toolhost.toml", &text);
    let out = root.run_cli(&["call", "echo", "--args", r#"{"x": 1}"#]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let ok = json!({"gen_ai.tool.name": "echo", "toolhost.call.outcome": "ok"});
    let points = receiver
        .wait_for_metrics(|points| value(points, "toolhost.tool.calls", ok.clone()) == Some(1));
    let calls = point(&points, "toolhost.tool.calls", &ok).expect("the call");
    assert_eq!(calls["service"], "from-the-file", "{calls:#}");
    let sent = receiver.metrics_bodies();
    assert_eq!(sent, 1, "one export, at the end: {points:#?}");
}
