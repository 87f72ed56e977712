//! A tool's answer as it crossed the boundary, and the guard around a plugin's future.

use std::path::Path;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use plugin_abi::{FfiError, FfiFuture, FfiResponse, FfiResult};
use plugin_api::{Response, ToolError};

use crate::isolation::protocol::WireResponse;
use crate::load::error::{LoadError, LoadErrorKind};

/// A tool's answer as it crossed the library boundary. Its text stays where the plugin put
/// it until the host takes the part it keeps, so a long answer is never copied whole. The
/// second field counts the bytes of its text already cut off before it reached the host (by
/// an isolated tool's worker process, at the same limit).
pub(crate) struct PluginAnswer(pub(super) FfiResponse, pub(super) usize);

impl PluginAnswer {
    /// The answer's metadata, read for the audit.
    pub(crate) fn metadata(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        let text = self.0.metadata.as_ref().into_option()?;
        serde_json::from_str(text).ok()
    }

    /// An answer that came from a worker process.
    pub(crate) fn from_wire(answer: WireResponse) -> Self {
        let cut = usize::try_from(answer.cut).unwrap_or(usize::MAX);
        Self(answer.into(), cut)
    }

    /// The length of the answer's whole text, the part cut off before it reached the host
    /// included.
    pub(crate) fn total_len(&self) -> usize {
        self.0.message.len().saturating_add(self.1)
    }

    /// The answer in its wire form.
    pub(crate) fn into_ffi(self) -> FfiResponse {
        self.0
    }

    /// The answer's text.
    pub(crate) fn message(&self) -> &str {
        self.0.message.as_str()
    }

    /// The answer, its text cut to its first `keep` bytes (a character boundary): only those
    /// are copied.
    pub(crate) fn into_response(mut self, keep: usize) -> Response {
        let message = std::mem::take(&mut self.0.message);
        let head = match message.len() <= keep {
            true => message.into_string(),
            false => message.as_str()[..keep].to_owned(),
        };
        let mut response = Response::from(self.0);
        response.message = head;
        response
    }
}

/// Awaits a plugin's future. The export glue already turns panics into errors; this also catches
/// the one async-ffi raises when a poll crossing the boundary panicked anyway (a library built
/// with other glue), so the host never unwinds from plugin code.
pub(super) async fn settle<T>(fut: FfiFuture<FfiResult<T>>) -> Result<T, ToolError> {
    struct CatchUnwind<F>(F);
    impl<F: Future + Unpin> Future for CatchUnwind<F> {
        type Output = Option<F::Output>;
        fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
            match catch_unwind(AssertUnwindSafe(|| Pin::new(&mut self.0).poll(cx))) {
                Ok(Poll::Ready(v)) => Poll::Ready(Some(v)),
                Ok(Poll::Pending) => Poll::Pending,
                Err(_) => Poll::Ready(None),
            }
        }
    }
    match CatchUnwind(fut).await {
        Some(result) => result.into_result().map_err(ToolError::from),
        None => Err(ToolError::internal(
            "the plugin's future panicked across the library boundary: rebuild the plugin with plugin_api::export_tool! or export_extension!, which catch its panics",
        )),
    }
}

pub(super) fn init_failed(source: &Path, e: FfiError) -> LoadError {
    LoadError::new(
        source,
        LoadErrorKind::InitFailed,
        format!(
            "its initialisation failed: {}",
            ToolError::from(e).message()
        ),
    )
}
