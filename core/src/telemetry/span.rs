//! The host's spans: OpenTelemetry spans made with the tracer of the provider given to
//! [`install`], each a child of the current OpenTelemetry context (the one [`Span::run`]
//! attaches while a future runs). Until a provider is installed a span is nothing at all: one
//! atomic load, no allocation, no clock read.
//!
//! The spans are made with the SDK directly, not through `tracing`: a `tracing` layer alone
//! (the registry and its span bookkeeping) costs more per call than the SDK's spans do
//! (BENCHMARKS.md, `telemetry`).

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;
use std::task::Poll;

use opentelemetry::trace::{
    SpanKind, Status, TraceContextExt as _, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

use super::masked;
use super::names::ERROR_TYPE;
use crate::sync::{read, write};

/// Whether a tracer is installed: read first, so that no span costs more than this load.
static ON: AtomicBool = AtomicBool::new(false);
/// The tracer spans are made with.
static TRACER: RwLock<Option<SdkTracer>> = RwLock::new(None);
/// Records the host's spans with `provider` from now on (`None`: records none any more).
///
/// Build the provider with [`SpanIds`](super::SpanIds) as its id generator, so that a span
/// timed by a worker process is exported with the id its plugin passed on. Keep the provider,
/// and shut it down at the end to send the last spans (after `install(None)`).
///
/// ```
/// use opentelemetry_sdk::trace::SdkTracerProvider;
///
/// let provider = SdkTracerProvider::builder()
///     // .with_batch_exporter(exporter): an OTLP exporter, as `toolhost` builds it
///     .with_id_generator(toolhost::telemetry::SpanIds::default())
///     .build();
/// toolhost::telemetry::install(Some(&provider));
/// assert!(toolhost::telemetry::recording());
/// // ... calls made now have spans ...
/// toolhost::telemetry::install(None);
/// provider.shutdown().unwrap();
/// ```
pub fn install(provider: Option<&SdkTracerProvider>) {
    let tracer = provider.map(|p| p.tracer("toolhost"));
    let on = tracer.is_some();
    *write(&TRACER) = tracer;
    ON.store(on, Ordering::SeqCst);
}

/// The installed tracer, if any.
pub(crate) fn tracer() -> Option<SdkTracer> {
    if !ON.load(Ordering::Relaxed) {
        return None;
    }
    read(&TRACER).clone()
}

/// Whether spans are recorded (a tracer is installed).
pub fn recording() -> bool {
    ON.load(Ordering::Relaxed)
}

/// One span of the host's trace, ended when dropped; nothing when no tracer is installed.
#[must_use = "a span ends when dropped"]
pub struct Span(Option<Context>);

impl Span {
    /// A span that records nothing.
    pub fn none() -> Self {
        Self(None)
    }

    /// A span named `name()`, of `kind`, with `attributes()`, a child of the current context.
    /// `name` and `attributes` are called only when the span is recorded; every string in them
    /// must be masked already ([`masked`](super::masked)).
    pub fn start(
        name: impl FnOnce() -> Cow<'static, str>,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Self {
        match tracer() {
            Some(tracer) => Self::make(&tracer, name(), kind, attributes(), &Context::current()),
            None => Self(None),
        }
    }

    /// As [`start`](Self::start), a child of the span whose `traceparent` (and `tracestate`)
    /// a request carried; of the current context when it carries none that reads.
    pub fn start_remote(
        name: impl FnOnce() -> Cow<'static, str>,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
        traceparent: Option<&str>,
        tracestate: Option<&str>,
    ) -> Self {
        let Some(tracer) = tracer() else {
            return Self(None);
        };
        let parent = traceparent
            .map(|traceparent| super::propagation::context(traceparent, tracestate))
            .filter(|remote| remote.span().span_context().is_valid())
            .unwrap_or_else(Context::current);
        Self::make(&tracer, name(), kind, attributes(), &parent)
    }

    fn make(
        tracer: &SdkTracer,
        name: Cow<'static, str>,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
        parent: &Context,
    ) -> Self {
        let span = tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes)
            .start_with_context(tracer, parent);
        Self(Some(parent.with_span(span)))
    }

    /// Whether this span is recorded.
    pub fn is_recording(&self) -> bool {
        self.0.is_some()
    }

    /// Sets `attributes()` (called only when the span is recorded; strings masked already).
    pub fn set(&self, attributes: impl FnOnce() -> Vec<KeyValue>) {
        if let Some(context) = &self.0 {
            context.span().set_attributes(attributes());
        }
    }

    /// Records that what the span covers failed: `error.type` is `kind`, and the status an
    /// error with `message`, masked.
    pub fn failed(&self, kind: &str, message: &str) {
        if let Some(context) = &self.0 {
            let span = context.span();
            span.set_attribute(KeyValue::new(ERROR_TYPE, kind.to_owned()));
            span.set_status(Status::error(masked(message)));
        }
    }

    /// `future` run with this span as the current context: its spans are this one's
    /// children, and [`traceparent`](super::traceparent) is this span's. The span goes on
    /// after it; see [`own`](Self::own).
    pub fn run<F: Future>(&self, future: F) -> InSpan<F> {
        InSpan {
            future,
            context: self.0.clone(),
            owned: None,
        }
    }

    /// As [`run`](Self::run), and the span ends when the future is dropped (for a task
    /// spawned to run on its own).
    pub fn own<F: Future>(self, future: F) -> InSpan<F> {
        InSpan {
            future,
            context: self.0.clone(),
            owned: Some(self),
        }
    }

    /// As [`run`](Self::run), for code that does not wait.
    pub fn run_sync<T>(&self, f: impl FnOnce() -> T) -> T {
        match &self.0 {
            Some(context) => {
                let _attached = context.clone().attach();
                f()
            }
            None => f(),
        }
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(context) = &self.0 {
            context.span().end();
        }
    }
}

pin_project_lite::pin_project! {
    /// A future run within a span's context ([`Span::run`]): the context is current while it
    /// is polled, on whichever thread polls it.
    pub struct InSpan<F> {
        #[pin]
        future: F,
        context: Option<Context>,
        owned: Option<Span>,
    }
}

impl<F: Future> Future for InSpan<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _attached = this.context.as_ref().map(|c| c.clone().attach());
        this.future.poll(cx)
    }
}

/// `future` with the current context, for another thread to poll it (a call thread): its
/// spans, and the `traceparent` its plugin reads, are then the current span's children.
pub(crate) fn carried<F: Future>(future: F) -> InSpan<F> {
    InSpan {
        future,
        context: recording().then(Context::current),
        owned: None,
    }
}

/// Adds the event `name` with `attributes()` to the current span, when one is recorded.
pub(crate) fn event(name: &'static str, attributes: impl FnOnce() -> Vec<KeyValue>) {
    if recording() {
        let context = Context::current();
        let span = context.span();
        if span.is_recording() {
            span.add_event(name, attributes());
        }
    }
}
