//! OpenTelemetry export of the host's spans (see `toolhost::telemetry`) and, in `metrics.rs`,
//! of its metrics, configured by the standard variables and off unless they ask for it:
//!
//! - `OTEL_SDK_DISABLED=true`: off;
//! - `OTEL_TRACES_EXPORTER` (`OTEL_METRICS_EXPORTER`): `otlp` (on) or `none` (off); unset,
//!   on when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
//!   (`…_METRICS_ENDPOINT`) is set;
//! - the exporter's (`OTEL_EXPORTER_OTLP_ENDPOINT`, `…_HEADERS`, `…_TIMEOUT`), the batch's
//!   (`OTEL_BSP_SCHEDULE_DELAY`, …) and the resource's (`OTEL_SERVICE_NAME`, default
//!   `toolhost`; `OTEL_RESOURCE_ATTRIBUTES`) are read by the SDK itself.
//!
//! `[telemetry]` in `usr/toolhost.toml` sets the same values (endpoint, service name, traces
//! exporter, headers); each variable that is set wins over the file's value.
//!
//! Traces go over OTLP HTTP/protobuf (`OTEL_EXPORTER_OTLP_PROTOCOL` other than
//! `http/protobuf` is refused with a warning). Only the host's own spans are exported (see
//! `toolhost::telemetry`), each attribute masked where it is made; no log event is.

pub(crate) mod metrics;

use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;

/// Flushes the spans not yet sent when dropped (at the end of `main`).
pub(crate) struct Export(Option<SdkTracerProvider>);

impl Drop for Export {
    fn drop(&mut self) {
        if let Some(provider) = self.0.take() {
            toolhost::telemetry::install(None);
            if let Err(e) = provider.shutdown() {
                eprintln!("toolhost: sending the last traces failed: {e}");
            }
        }
    }
}

/// Whether the variables ask for `signal` (`TRACES`, `METRICS`) to be exported; why not,
/// when they ask for something this build cannot do.
fn wanted(var: impl Fn(&str) -> Option<String>, signal: &str) -> Result<bool, String> {
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(false);
    }
    let what = signal.to_lowercase();
    let exporter = format!("OTEL_{signal}_EXPORTER");
    let on = match var(&exporter).as_deref().map(str::trim) {
        Some("none") => return Ok(false),
        Some("otlp") => true,
        Some("") | None => {
            var("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
                || var(&format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")).is_some()
        }
        Some(other) => {
            return Err(format!(
                "{exporter}={other}: only `otlp` and `none` are supported; {what} are not exported"
            ));
        }
    };
    let protocol = var(&format!("OTEL_EXPORTER_OTLP_{signal}_PROTOCOL"))
        .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"));
    match protocol.as_deref() {
        Some(p) if on && p != "http/protobuf" => Err(format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={p}: only `http/protobuf` is supported; {what} are not exported"
        )),
        _ => Ok(on),
    }
}

/// The variable `name` if set and not empty.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The value of the standard variable `name`: the variable's if set (the OpenTelemetry spec:
/// a variable that is set wins over the file's value), else `file`'s.
fn var(file: &toolhost::config::TelemetrySettings, name: &str) -> Option<String> {
    env(name).or_else(|| file.var(name))
}

/// The resource of every export: `service.name` from `OTEL_SERVICE_NAME` (read by the SDK),
/// else the file's, else `toolhost`.
fn resource(file: &toolhost::config::TelemetrySettings) -> Resource {
    let mut resource = Resource::builder();
    if env("OTEL_SERVICE_NAME").is_none() {
        let name = file
            .service_name
            .clone()
            .unwrap_or_else(|| "toolhost".to_owned());
        resource = resource.with_service_name(name);
    }
    resource.build()
}

/// `builder` given the file's endpoint (with the signal's path, `/v1/traces` for `TRACES`)
/// and headers, each only where no variable sets it: the SDK reads the variables itself, and
/// a value given in code would win over them.
fn with_file<B: WithExportConfig + WithHttpConfig>(
    mut builder: B,
    file: &toolhost::config::TelemetrySettings,
    signal: &str,
) -> B {
    if env("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
        && env(&format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")).is_none()
    {
        if let Some(base) = &file.endpoint {
            let path = signal.to_ascii_lowercase();
            builder = builder.with_endpoint(format!("{}/v1/{path}", base.trim_end_matches('/')));
        }
    }
    if env("OTEL_EXPORTER_OTLP_HEADERS").is_none() && !file.headers.is_empty() {
        builder = builder.with_headers(file.headers.iter().cloned().collect());
    }
    builder
}

/// Starts exporting the host's spans if the variables and `file` (`[telemetry]`) ask for it;
/// the guard flushes them at the end. A configuration that cannot be served is a warning:
/// the command runs without export.
pub(crate) fn from_env(file: &toolhost::config::TelemetrySettings) -> Export {
    match wanted(|name| var(file, name), "TRACES") {
        Ok(true) => {}
        Ok(false) => return Export(None),
        Err(why) => {
            eprintln!("toolhost: {why}");
            return Export(None);
        }
    }
    // The exporter's HTTPS, if the endpoint is one, with the workspace's one crypto provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = opentelemetry_otlp::SpanExporter::builder().with_http();
    let exporter = match with_file(builder, file, "TRACES").build() {
        Ok(exporter) => exporter,
        Err(e) => {
            eprintln!(
                "toolhost: the OTLP trace exporter cannot be built ({e}); traces are not exported"
            );
            return Export(None);
        }
    };
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource(file))
        .with_id_generator(toolhost::telemetry::SpanIds::default())
        .build();
    toolhost::telemetry::install(Some(&provider));
    Export(Some(provider))
}

#[cfg(test)]
mod tests {
    use super::wanted;

    fn vars<'a>(set: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            set.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn export_is_off_unless_asked_for() {
        assert_eq!(wanted(vars(&[]), "TRACES"), Ok(false));
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        assert_eq!(wanted(vars(&[endpoint]), "TRACES"), Ok(true));
        assert_eq!(
            wanted(
                vars(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")]),
                "TRACES"
            ),
            Ok(false)
        );
        assert_eq!(
            wanted(vars(&[endpoint, ("OTEL_SDK_DISABLED", "true")]), "TRACES"),
            Ok(false)
        );
        assert_eq!(
            wanted(vars(&[("OTEL_TRACES_EXPORTER", "otlp")]), "TRACES"),
            Ok(true)
        );
        let zipkin = wanted(vars(&[("OTEL_TRACES_EXPORTER", "zipkin")]), "TRACES").unwrap_err();
        assert!(zipkin.contains("OTEL_TRACES_EXPORTER=zipkin"), "{zipkin}");
        let grpc = wanted(
            vars(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]),
            "TRACES",
        )
        .unwrap_err();
        assert!(grpc.contains("http/protobuf"), "{grpc}");
    }

    #[test]
    fn metrics_are_asked_for_by_their_own_variables() {
        fn metrics(set: &[(&str, &str)]) -> Result<bool, String> {
            wanted(vars(set), "METRICS")
        }
        assert_eq!(metrics(&[]), Ok(false));
        assert_eq!(metrics(&[("OTEL_METRICS_EXPORTER", "otlp")]), Ok(true));
        let endpoint = (
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            "http://127.0.0.1:4318/v1/metrics",
        );
        assert_eq!(metrics(&[endpoint]), Ok(true));
        assert_eq!(
            wanted(vars(&[endpoint]), "TRACES"),
            Ok(false),
            "a metrics endpoint does not turn traces on"
        );
        let general = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        let off = ("OTEL_METRICS_EXPORTER", "none");
        assert_eq!(metrics(&[general, off]), Ok(false));
        assert_eq!(wanted(vars(&[general, off]), "TRACES"), Ok(true));
        let prometheus = metrics(&[("OTEL_METRICS_EXPORTER", "prometheus")]).unwrap_err();
        assert!(
            prometheus.starts_with("OTEL_METRICS_EXPORTER=prometheus: only `otlp` and `none`"),
            "{prometheus}"
        );
        let grpc = ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "grpc");
        assert!(metrics(&[general, grpc]).is_err());
    }
}
