//! Trace context across process boundaries (W3C Trace Context, the `traceparent` text
//! `00-<trace id>-<span id>-<flags>`): what the host puts on its outgoing requests (an MCP
//! server's `_meta`, a model server's `traceparent` header, a worker's call) and what a plugin
//! reads from its `Context`; and the spans a worker process timed, which the host exports with
//! the span id the worker chose (so that what its plugin passed on points at them).

use std::cell::Cell;
use std::collections::HashMap;
use std::time::SystemTime;

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::Tracer as _;
use opentelemetry::trace::{Span as _, SpanId, SpanKind, Status, TraceContextExt as _, TraceId};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};

use super::span::{recording, tracer};

/// A span timed by a worker process, exported by the host: its own `traceparent` (its trace
/// and span id, chosen by the worker so that the plugin could pass them on), its parent's, and
/// its times.
#[derive(Debug)]
pub struct RemoteSpan<'a> {
    /// The span's name.
    pub name: &'a str,
    /// The span's own `traceparent`.
    pub traceparent: &'a str,
    /// Its parent's `traceparent` (a span of the host).
    pub parent: &'a str,
    /// When it started.
    pub start: SystemTime,
    /// When it ended.
    pub end: SystemTime,
    /// Its attributes, each value masked already.
    pub attributes: &'a [(&'static str, String)],
    /// The error kind it ended with, if it failed.
    pub error: Option<&'a str>,
}

/// The `traceparent` of the current span, when it is recorded: what the host's outgoing
/// requests carry. `None` at the cost of one atomic load while no tracer is installed.
pub fn traceparent() -> Option<String> {
    if !recording() {
        return None;
    }
    let context = Context::current();
    let span = context.span();
    let span = span.span_context();
    if !span.is_valid() {
        return None;
    }
    Some(format!(
        "00-{}-{}-{:02x}",
        span.trace_id(),
        span.span_id(),
        span.trace_flags().to_u8()
    ))
}

/// The context of a remote parent: its `traceparent` and `tracestate` read as W3C Trace
/// Context says (the empty context when `traceparent` does not read).
pub(crate) fn context(traceparent: &str, tracestate: Option<&str>) -> Context {
    let mut carrier = HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
    if let Some(state) = tracestate {
        carrier.insert("tracestate".to_owned(), state.to_owned());
    }
    TraceContextPropagator::new().extract_with_context(&Context::new(), &carrier)
}

thread_local! {
    /// The span id the next span built on this thread takes, when set.
    static NEXT_SPAN_ID: Cell<Option<SpanId>> = const { Cell::new(None) };
}

/// The id generator of a provider given to [`install`](super::install): random ids, except
/// for the spans a worker timed, exported with the span id the worker chose.
#[derive(Debug, Default)]
pub struct SpanIds(RandomIdGenerator);

impl IdGenerator for SpanIds {
    fn new_trace_id(&self) -> TraceId {
        self.0.new_trace_id()
    }

    fn new_span_id(&self) -> SpanId {
        NEXT_SPAN_ID
            .with(Cell::take)
            .unwrap_or_else(|| self.0.new_span_id())
    }
}

/// Exports a span a worker timed, when spans are recorded.
pub(crate) fn export(span: RemoteSpan<'_>) {
    let Some(tracer) = tracer() else {
        return;
    };
    let Some((_, own_id, _)) = parse_traceparent(span.traceparent) else {
        return;
    };
    let Ok(own_id) = SpanId::from_hex(own_id) else {
        return;
    };
    let parent = context(span.parent, None);
    let attributes: Vec<KeyValue> = span
        .attributes
        .iter()
        .map(|(key, value)| KeyValue::new(*key, value.clone()))
        .collect();
    let builder = tracer
        .span_builder(span.name.to_owned())
        .with_kind(SpanKind::Internal)
        .with_start_time(span.start)
        .with_attributes(attributes);
    NEXT_SPAN_ID.with(|next| next.set(Some(own_id)));
    let mut built = tracer.build_with_context(builder, &parent);
    // Taken by the span just built; cleared in case sampling built none.
    NEXT_SPAN_ID.with(|next| next.set(None));
    if let Some(kind) = span.error {
        built.set_status(Status::error(kind.to_owned()));
    }
    built.end_with_timestamp(span.end);
}

/// The parts of a `traceparent`: trace id, span id (lowercase hex) and flags; `None` when it
/// is not one (version `00`, ids not all zeros).
pub fn parse_traceparent(text: &str) -> Option<(&str, &str, &str)> {
    let mut parts = text.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| {
        s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let zero = |s: &str| s.bytes().all(|b| b == b'0');
    let fits = version == "00"
        && parts.next().is_none()
        && hex(trace, 32)
        && !zero(trace)
        && hex(span, 16)
        && !zero(span)
        && hex(flags, 2);
    fits.then_some((trace, span, flags))
}

/// A child of `parent` (a `traceparent`): the same trace and flags, a new span id.
pub(crate) fn child_of(parent: &str) -> Option<String> {
    let (trace, _, flags) = parse_traceparent(parent)?;
    Some(format!("00-{trace}-{}-{flags}", new_span_id()))
}

/// A new span id, 16 hex digits, not all zeros: the standard library's per-process random
/// hash keys mixed with the clock and a counter (a span id needs uniqueness, not secrecy).
fn new_span_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    hasher.write_u64(now);
    hasher.write_u32(std::process::id());
    format!("{:016x}", hasher.finish().max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_read_and_a_child_keeps_its_trace() {
        let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let (trace, span, flags) = parse_traceparent(parent).expect("a traceparent");
        assert_eq!(
            (trace, span, flags),
            ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "01")
        );
        let child = child_of(parent).expect("a child");
        let (child_trace, child_span, child_flags) = parse_traceparent(&child).expect("valid");
        assert_eq!((child_trace, child_flags), (trace, flags));
        assert_ne!(child_span, span);
        assert_ne!(
            child_of(parent),
            Some(child),
            "each child has a span id of its own"
        );
        for bad in [
            "",
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad}");
        }
    }
}
