//! OTLP export of the host's metrics (`toolhost::telemetry::metrics`): on when
//! `OTEL_METRICS_EXPORTER=otlp`, or unset with `OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` set (or `[telemetry]`'s `metrics_exporter` and
//! `endpoint`), every `OTEL_METRIC_EXPORT_INTERVAL` ms (`metric_export_interval_ms`; the
//! SDK's default is 60 000), and once more when the command ends. Cumulative sums, over
//! HTTP/protobuf to the endpoint's `/v1/metrics`.

use std::time::Duration;

use opentelemetry_sdk::metrics::PeriodicReader;

use super::{env, resource, var, wanted, with_file};

/// Exports what the metrics hold when dropped (at the end of `main`).
pub(crate) struct Export(bool);

impl Drop for Export {
    fn drop(&mut self) {
        if self.0 {
            if let Err(e) = toolhost::telemetry::metrics::shutdown() {
                eprintln!("toolhost: sending the last metrics failed: {e}");
            }
        }
    }
}

/// Turns the metrics and their export on when the variables and `file` ask for it. A
/// configuration that cannot be served is a warning: the command runs without export.
pub(crate) fn from_env(file: &toolhost::config::TelemetrySettings) -> Export {
    match wanted(|name| var(file, name), "METRICS") {
        Ok(true) => {}
        Ok(false) => return Export(false),
        Err(why) => {
            eprintln!("toolhost: {why}");
            return Export(false);
        }
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = opentelemetry_otlp::MetricExporter::builder().with_http();
    let exporter = match with_file(builder, file, "METRICS").build() {
        Ok(exporter) => exporter,
        Err(e) => {
            eprintln!(
                "toolhost: the OTLP metric exporter cannot be built ({e}); metrics are not exported"
            );
            return Export(false);
        }
    };
    let mut reader = PeriodicReader::builder(exporter);
    // The SDK reads OTEL_METRIC_EXPORT_INTERVAL itself; a variable that is not a number is
    // ignored by it, so it is refused here with a warning.
    match env("OTEL_METRIC_EXPORT_INTERVAL") {
        Some(ms) if !matches!(ms.parse::<u64>(), Ok(n) if n > 0) => {
            eprintln!(
                "toolhost: OTEL_METRIC_EXPORT_INTERVAL={ms}: expected a whole number of milliseconds, 1 or more; the default (60000) is used"
            );
            reader = reader.with_interval(Duration::from_secs(60));
        }
        Some(_) => {}
        None => {
            if let Some(ms) = file.metric_export_interval_ms {
                reader = reader.with_interval(Duration::from_millis(ms));
            }
        }
    }
    let on = toolhost::telemetry::metrics::enable_exporting(reader.build(), resource(file));
    Export(on)
}
