//! The metrics as OpenMetrics text (what Prometheus scrapes), rendered from what the meter
//! collected, with the names OpenTelemetry's Prometheus compatibility gives them: characters
//! other than letters, digits, `_` and `:` become `_`, the unit is appended (`s` as
//! `_seconds`; an annotation like `{token}` is dropped) and a counter's samples end in
//! `_total`. A non-monotonic sum is a gauge.

use std::fmt::{Display, Write as _};

use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData, ResourceMetrics};

/// `collected` as OpenMetrics text, ending with `# EOF`.
pub(crate) fn render(collected: &ResourceMetrics) -> String {
    let mut out = String::new();
    for scope in collected.scope_metrics() {
        for metric in scope.metrics() {
            match metric.data() {
                AggregatedMetrics::F64(data) => family(&mut out, metric, data),
                AggregatedMetrics::U64(data) => family(&mut out, metric, data),
                AggregatedMetrics::I64(data) => family(&mut out, metric, data),
            }
        }
    }
    out.push_str("# EOF\n");
    out
}

/// The unit's suffix (`seconds` for `s`), or none for an annotation (`{token}`).
fn unit_suffix(unit: &str) -> Option<String> {
    match unit {
        "" | "1" => None,
        u if u.starts_with('{') => None,
        "s" => Some("seconds".to_owned()),
        "ms" => Some("milliseconds".to_owned()),
        "By" => Some("bytes".to_owned()),
        other => Some(sanitized(other)),
    }
}

fn sanitized(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | ':' => c,
            _ => '_',
        })
        .collect()
}

fn family<T: Display + Copy>(out: &mut String, metric: &Metric, data: &MetricData<T>) {
    let mut name = sanitized(metric.name());
    let unit = unit_suffix(metric.unit());
    if let Some(unit) = &unit {
        if !name.ends_with(&format!("_{unit}")) {
            name = format!("{name}_{unit}");
        }
    }
    let kind = match data {
        MetricData::Sum(sum) if sum.is_monotonic() => "counter",
        MetricData::Sum(_) | MetricData::Gauge(_) => "gauge",
        MetricData::Histogram(_) => "histogram",
        // Not used by the host: nothing to render.
        MetricData::ExponentialHistogram(_) => return,
    };
    if kind == "counter" {
        if let Some(base) = name.strip_suffix("_total") {
            name = base.to_owned();
        }
    }
    let help = metric
        .description()
        .replace('\\', r"\\")
        .replace('\n', r"\n");
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    if let Some(unit) = &unit {
        let _ = writeln!(out, "# UNIT {name} {unit}");
    }
    match data {
        MetricData::Sum(sum) => {
            let sample = match kind {
                "counter" => format!("{name}_total"),
                _ => name.clone(),
            };
            for point in sum.data_points() {
                let labels = labels(point.attributes(), None);
                let _ = writeln!(out, "{sample}{labels} {}", point.value());
            }
        }
        MetricData::Gauge(gauge) => {
            for point in gauge.data_points() {
                let labels = labels(point.attributes(), None);
                let _ = writeln!(out, "{name}{labels} {}", point.value());
            }
        }
        MetricData::Histogram(histogram) => {
            for point in histogram.data_points() {
                let mut cumulative = 0;
                for (bound, count) in point.bounds().zip(point.bucket_counts()) {
                    cumulative += count;
                    let labels = labels(point.attributes(), Some(&bound.to_string()));
                    let _ = writeln!(out, "{name}_bucket{labels} {cumulative}");
                }
                let labels_inf = labels(point.attributes(), Some("+Inf"));
                let _ = writeln!(out, "{name}_bucket{labels_inf} {}", point.count());
                let plain = labels(point.attributes(), None);
                let _ = writeln!(out, "{name}_count{plain} {}", point.count());
                let _ = writeln!(out, "{name}_sum{plain} {}", point.sum());
            }
        }
        MetricData::ExponentialHistogram(_) => {}
    }
}

/// `{key="value",…}` sorted by key (nothing when there is none), with `le` last when given.
fn labels<'a>(attributes: impl Iterator<Item = &'a KeyValue>, le: Option<&str>) -> String {
    let mut pairs: Vec<(String, String)> = attributes
        .map(|kv| (sanitized(kv.key.as_str()), kv.value.to_string()))
        .collect();
    pairs.sort();
    if let Some(le) = le {
        pairs.push(("le".to_owned(), le.to_owned()));
    }
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| {
            let v = v
                .replace('\\', r"\\")
                .replace('"', "\\\"")
                .replace('\n', r"\n");
            format!("{k}=\"{v}\"")
        })
        .collect();
    format!("{{{}}}", inner.join(","))
}
