//! The trace context the host passes on (see `toolhost::telemetry::propagation`), read from
//! the OpenTelemetry layer's spans; and the spans a worker timed, exported with the span id the
//! worker chose (so that what its plugin passed on points at them).

use std::cell::Cell;
use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{Span as _, SpanKind};
use opentelemetry::trace::{SpanId, Status, TraceContextExt as _, TraceId, Tracer as _};
use opentelemetry::KeyValue;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SdkTracer};
use toolhost::telemetry::propagation::{parse_traceparent, Propagation, RemoteSpan};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

thread_local! {
    /// The span id the next span built on this thread takes, when set.
    static NEXT_SPAN_ID: Cell<Option<SpanId>> = const { Cell::new(None) };
}

/// Random ids, except a span id set for the next span ([`NEXT_SPAN_ID`]).
#[derive(Debug, Default)]
pub(crate) struct Ids(RandomIdGenerator);

impl IdGenerator for Ids {
    fn new_trace_id(&self) -> TraceId {
        self.0.new_trace_id()
    }

    fn new_span_id(&self) -> SpanId {
        NEXT_SPAN_ID
            .with(Cell::take)
            .unwrap_or_else(|| self.0.new_span_id())
    }
}

/// The propagation of a process that exports with `tracer`.
pub(crate) struct Exported(pub(crate) SdkTracer);

impl Propagation for Exported {
    fn traceparent(&self) -> Option<String> {
        let context = tracing::Span::current().context();
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

    fn export(&self, span: RemoteSpan<'_>) {
        let Some((_, own_id, _)) = parse_traceparent(span.traceparent) else {
            return;
        };
        let Ok(own_id) = SpanId::from_hex(own_id) else {
            return;
        };
        let carrier = HashMap::from([("traceparent".to_owned(), span.parent.to_owned())]);
        let parent = TraceContextPropagator::new().extract(&carrier);
        let attributes: Vec<KeyValue> = span
            .attributes
            .iter()
            .map(|(key, value)| KeyValue::new(*key, value.clone()))
            .collect();
        let builder = self
            .0
            .span_builder(span.name.to_owned())
            .with_kind(SpanKind::Internal)
            .with_start_time(span.start)
            .with_attributes(attributes);
        NEXT_SPAN_ID.with(|next| next.set(Some(own_id)));
        let mut built = self.0.build_with_context(builder, &parent);
        // Taken by the span just built; cleared in case sampling built none.
        NEXT_SPAN_ID.with(|next| next.set(None));
        if let Some(kind) = span.error {
            built.set_status(Status::error(kind.to_owned()));
        }
        built.end_with_timestamp(span.end);
    }
}
