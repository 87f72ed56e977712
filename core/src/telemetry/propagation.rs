//! Trace context across process boundaries (W3C Trace Context, the `traceparent` text
//! `00-<trace id>-<span id>-<flags>`): what the host puts on its outgoing requests (an MCP
//! server's `tools/call` `_meta`, a model server's `traceparent` header, a worker's call) and
//! what a plugin reads from its `Context`.
//!
//! This crate records spans but never exports them: the binary that exports installs a
//! [`Propagation`] that reads the current span's context and exports the spans a worker
//! process timed ([`RemoteSpan`]). Until one is installed, [`traceparent`] is `None` at the
//! cost of one atomic load, and nothing is sent.

use std::sync::OnceLock;
use std::time::SystemTime;

/// What an exporting binary plugs in (see [`install`]).
pub trait Propagation: Send + Sync + 'static {
    /// The `traceparent` of the current span, when it is recorded for export.
    fn traceparent(&self) -> Option<String>;
    /// Exports a span timed in another process (a worker) that the host exports for it.
    fn export(&self, span: RemoteSpan<'_>);
}

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

static INSTALLED: OnceLock<Box<dyn Propagation>> = OnceLock::new();

/// Installs the process's propagation, once; `false` if one was installed already.
pub fn install(propagation: Box<dyn Propagation>) -> bool {
    INSTALLED.set(propagation).is_ok()
}

/// The `traceparent` of the current span, when a [`Propagation`] is installed and the span is
/// recorded: what the host's outgoing requests carry.
pub fn traceparent() -> Option<String> {
    INSTALLED.get()?.traceparent()
}

/// Exports a span a worker timed, when a [`Propagation`] is installed.
pub(crate) fn export(span: RemoteSpan<'_>) {
    if let Some(installed) = INSTALLED.get() {
        installed.export(span);
    }
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
