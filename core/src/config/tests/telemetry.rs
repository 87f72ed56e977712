//! `[telemetry]`: the values of the standard `OTEL_*` variables, host-wide, checked strictly.

use super::*;

#[test]
fn the_file_gives_the_standard_variables_values() {
    let text = "[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\nservice_name = \"edge\"\n\
                traces_exporter = \"otlp\"\nmetrics_exporter = \"none\"\n\
                metric_export_interval_ms = 250\n[telemetry.headers]\nx-team = \"tools\"\n";
    let dir = root(&[(GLOBAL, text)]);
    let telemetry = Config::load_host(&Layout::new(dir.path()), CAP)
        .unwrap()
        .telemetry();
    assert_eq!(
        telemetry.var("OTEL_EXPORTER_OTLP_ENDPOINT").as_deref(),
        Some("http://127.0.0.1:4318")
    );
    assert_eq!(telemetry.var("OTEL_SERVICE_NAME").as_deref(), Some("edge"));
    assert_eq!(
        telemetry.var("OTEL_TRACES_EXPORTER").as_deref(),
        Some("otlp")
    );
    assert_eq!(
        telemetry.var("OTEL_EXPORTER_OTLP_HEADERS").as_deref(),
        Some("x-team=tools")
    );
    assert_eq!(
        telemetry.var("OTEL_METRICS_EXPORTER").as_deref(),
        Some("none")
    );
    assert_eq!(
        telemetry.var("OTEL_METRIC_EXPORT_INTERVAL").as_deref(),
        Some("250")
    );
    assert_eq!(telemetry.var("OTEL_SDK_DISABLED"), None);
    assert_eq!(load(&dir).unwrap().telemetry(), telemetry);
    assert_eq!(Config::default().telemetry(), TelemetrySettings::default());
}

#[test]
fn mistakes_are_one_line_and_a_profile_may_not_set_it() {
    let line = error(&[(GLOBAL, "[telemetry]\nendpoit = \"http://x\"\n")]);
    assert!(
        line.starts_with("usr/toolhost.toml:2: unknown key `endpoit` in [telemetry]"),
        "{line}"
    );
    let line = error(&[(GLOBAL, "[telemetry]\ntraces_exporter = \"zipkin\"\n")]);
    assert!(line.starts_with("usr/toolhost.toml:2: "), "{line}");
    assert!(line.contains("expected `otlp` or `none`"), "{line}");
    let line = error(&[(GLOBAL, "[telemetry]\nmetric_export_interval = 100\n")]);
    assert!(
        line.starts_with(
            "usr/toolhost.toml:2: unknown key `metric_export_interval` in [telemetry]"
        ),
        "{line}"
    );
    let line = error(&[(GLOBAL, "[telemetry]\nmetric_export_interval_ms = 0\n")]);
    assert!(line.starts_with("usr/toolhost.toml:2: "), "{line}");
    assert!(line.contains("milliseconds"), "{line}");
    let line = error(&[(GLOBAL, "[telemetry]\nmetrics_exporter = \"prometheus\"\n")]);
    assert!(line.contains("expected `otlp` or `none`"), "{line}");
    let line = error(&[(GLOBAL, "[telemetry]\nendpoint = \"127.0.0.1:4318\"\n")]);
    assert!(line.contains("http:// or https://"), "{line}");
    let line = error(&[(GLOBAL, "[telemetry]\nservice_name = 3\n")]);
    assert!(line.starts_with("usr/toolhost.toml:2: "), "{line}");
    let line = error(&[(
        DEV,
        "[calls]\nmax_retries = 1\n[telemetry]\nservice_name = \"x\"\n",
    )]);
    assert_eq!(
        line,
        "usr/agents/dev/toolhost.toml:3: [telemetry] is host-wide: set it in \
         usr/toolhost.toml, not in a profile's file"
    );
}
