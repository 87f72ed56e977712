//! Safe host-side handles to the tool and extension instances a library created.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use abi_stable::std_types::{ROption, RString};
use async_ffi::FfiFuture;
use plugin_api::__private::abi::{error_from_ffi, response_from_ffi, response_to_ffi, FfiResult};
use plugin_api::__private::abi::{FfiExtension, FfiResponse, FfiTool};
use plugin_api::{ExtensionInfo, Response, ToolError, ToolInfo};

use crate::context::CallContext;
use crate::error::{LoadError, LoadErrorKind};
use crate::generation::Generation;
use crate::governance::{ArgumentSchema, Breaker, BreakerState};
use crate::layout::Escaped;

/// A tool instance from a loaded library.
pub struct ToolHandle {
    ffi: FfiTool,
    /// The file stem: the name the tool is found by.
    name: Arc<str>,
    info: ToolInfo,
    /// `info.parameters`, compiled once for this build.
    pub(crate) schema: ArgumentSchema,
    /// This build's circuit breaker: a new build starts closed.
    pub(crate) breaker: Breaker,
    /// The file's SHA-256 for the audit, computed on first use.
    sha256: std::sync::OnceLock<Option<String>>,
    source: PathBuf,
    package: String,
    /// Dropped after the instance (fields drop after `Drop::drop`): shuts the library down.
    generation: Arc<Generation>,
}

// SAFETY: the export glue keeps the instance in an `Arc<T>` with `T: Send + Sync`, and every
// vtable function may be called from any thread.
unsafe impl Send for ToolHandle {}
unsafe impl Sync for ToolHandle {}

impl ToolHandle {
    pub(crate) fn create(generation: Arc<Generation>, source: &Path) -> Result<Self, LoadError> {
        let (handle, schema_error) = Self::instantiate(generation, source)?;
        match schema_error {
            None => Ok(handle),
            // The instance is dropped with the handle: the plugin's own clean-up runs.
            Some(e) => Err(LoadError::new(source, LoadErrorKind::BadSchema, e)),
        }
    }

    /// Creates the tool instance and reads its metadata; a parameters schema that does not
    /// compile is returned beside the handle (which then accepts any arguments), for
    /// [`inspect`](crate::inspect) to show.
    pub(crate) fn instantiate(
        generation: Arc<Generation>,
        source: &Path,
    ) -> Result<(Self, Option<String>), LoadError> {
        let module = generation.module;
        let new_tool = module.new_tool().into_option().ok_or_else(|| {
            LoadError::new(
                source,
                LoadErrorKind::WrongKind,
                "this library is an extension, not a tool: move it to an extensions/<point>/ folder",
            )
        })?;
        let ffi = new_tool()
            .into_result()
            .map_err(|e| init_failed(source, e))?;
        let info = serde_json::from_str(&ffi.info).unwrap_or_else(|e| {
            tracing::warn!(
                "{}: unreadable tool metadata ({e}); using defaults",
                Escaped(source)
            );
            ToolInfo::default()
        });
        let (schema, schema_error) = match ArgumentSchema::compile(&info.parameters) {
            Ok(schema) => (schema, None),
            Err(e) => (ArgumentSchema::any(), Some(e)),
        };
        let name = source
            .file_stem()
            .map(|s| s.to_string_lossy())
            .unwrap_or_default();
        let handle = Self {
            ffi,
            name: name.as_ref().into(),
            info,
            schema,
            breaker: Breaker::default(),
            sha256: std::sync::OnceLock::new(),
            source: source.to_owned(),
            package: module.package().as_str().to_owned(),
            generation,
        };
        Ok((handle, schema_error))
    }

    /// The name it is found by (its file name without extension).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name as a shared string, to avoid copying it per call.
    pub(crate) fn shared_name(&self) -> &Arc<str> {
        &self.name
    }

    /// The tool's metadata.
    pub fn info(&self) -> &ToolInfo {
        &self.info
    }

    /// The file it was loaded from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// The crate that built it.
    pub fn package(&self) -> &str {
        &self.package
    }

    /// The version of the crate that built it (`CARGO_PKG_VERSION`).
    pub fn version(&self) -> &str {
        &self.generation.version
    }

    /// The plugin-api version it was built against.
    pub fn contract(&self) -> &str {
        &self.generation.contract
    }

    /// Which load of its file this is: 1 for the first, one more per reload (from 1 again
    /// after the file was removed).
    pub fn generation(&self) -> u64 {
        self.generation.number
    }

    /// Whether the tool can run now (its `readiness`); a plugin built before 0.4 is ready.
    pub fn readiness(&self) -> plugin_api::Readiness {
        let Some(readiness) = self.ffi.vtable.readiness() else {
            return plugin_api::Readiness::Ready;
        };
        // SAFETY: `this` is ours until drop; the glue catches the plugin's panics.
        match unsafe { readiness(self.ffi.this) } {
            ROption::RNone => plugin_api::Readiness::Ready,
            ROption::RSome(reason) => plugin_api::Readiness::NotReady(reason.into_string()),
        }
    }

    /// Why the tool cannot be called now, if it cannot: not ready (its reason), or its breaker
    /// is open. Such a tool is left out of the tools prompt.
    pub fn unavailable(&self) -> Option<String> {
        if let Some(reason) = self.readiness().reason() {
            return Some(format!("not ready: {reason}"));
        }
        match self.breaker.snapshot() {
            BreakerState::Open { until, last } => Some(format!(
                "circuit breaker open until {} (last failure: {last})",
                crate::governance::clock(until)
            )),
            _ => None,
        }
    }

    /// The SHA-256 of the library file (hex), as the audit records it: computed when first
    /// asked, from the file in its layer.
    pub fn sha256(&self) -> Option<String> {
        self.sha256
            .get_or_init(|| crate::governance::file_sha256(&self.source))
            .clone()
    }

    /// The state of this build's circuit breaker.
    pub fn breaker_state(&self) -> BreakerState {
        self.breaker.snapshot()
    }

    pub(crate) fn has_before_hook(&self) -> bool {
        self.ffi.vtable.before_execution().is_some()
    }

    pub(crate) fn has_after_hook(&self) -> bool {
        self.ffi.vtable.after_execution().is_some()
    }

    pub(crate) async fn execute(
        &self,
        ctx: &Arc<CallContext>,
        args: String,
    ) -> Result<PluginAnswer, ToolError> {
        // SAFETY: `this` is ours until drop; the context reference is handed over.
        let fut = unsafe {
            (self.ffi.vtable.execute())(self.ffi.this, ctx.to_ffi(), RString::from(args))
        };
        settle(fut).await.map(PluginAnswer)
    }

    pub(crate) async fn before_execution(
        &self,
        ctx: &Arc<CallContext>,
        args: String,
    ) -> Result<(), ToolError> {
        let Some(hook) = self.ffi.vtable.before_execution().into_option() else {
            return Ok(());
        };
        // SAFETY: as in `execute`.
        let fut = unsafe { hook(self.ffi.this, ctx.to_ffi(), RString::from(args)) };
        settle(fut).await
    }

    pub(crate) async fn after_execution(
        &self,
        ctx: &Arc<CallContext>,
        response: &Response,
    ) -> Result<(), ToolError> {
        let Some(hook) = self.ffi.vtable.after_execution().into_option() else {
            return Ok(());
        };
        // SAFETY: as in `execute`.
        let fut = unsafe {
            hook(
                self.ffi.this,
                ctx.to_ffi(),
                response_to_ffi(response.clone()),
            )
        };
        settle(fut).await
    }
}

impl Drop for ToolHandle {
    fn drop(&mut self) {
        // SAFETY: gives back the instance reference `new_tool` returned, once.
        unsafe { (self.ffi.vtable.drop())(self.ffi.this) }
    }
}

/// A tool's answer as it crossed the library boundary. Its text stays where the plugin put
/// it until the host takes the part it keeps, so a long answer is never copied whole.
pub(crate) struct PluginAnswer(FfiResponse);

impl PluginAnswer {
    /// The answer's metadata, read for the audit.
    pub(crate) fn metadata(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        let text = self.0.metadata.as_ref().into_option()?;
        serde_json::from_str(text).ok()
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
        let mut response = response_from_ffi(self.0);
        response.message = head;
        response
    }
}

/// An extension instance from a loaded library.
pub struct ExtensionHandle {
    ffi: FfiExtension,
    info: ExtensionInfo,
    source: PathBuf,
    /// The point it runs at.
    pub(crate) point: Arc<str>,
    /// Its file name without extension; the sort key.
    pub(crate) name: Arc<str>,
    /// Dropped after the instance: shuts the library down.
    generation: Arc<Generation>,
}

// SAFETY: as for `ToolHandle`.
unsafe impl Send for ExtensionHandle {}
unsafe impl Sync for ExtensionHandle {}

impl ExtensionHandle {
    pub(crate) fn create(
        generation: Arc<Generation>,
        source: &Path,
        point: &str,
        name: &str,
    ) -> Result<Self, LoadError> {
        let new_extension = generation
            .module
            .new_extension()
            .into_option()
            .ok_or_else(|| {
                LoadError::new(
                    source,
                    LoadErrorKind::WrongKind,
                    "this library is a tool, not an extension: move it to a tools/ folder",
                )
            })?;
        let ffi = new_extension()
            .into_result()
            .map_err(|e| init_failed(source, e))?;
        let info = serde_json::from_str(&ffi.info).unwrap_or_default();
        Ok(Self {
            ffi,
            info,
            source: source.to_owned(),
            point: point.into(),
            name: name.into(),
            generation,
        })
    }

    /// The extension's metadata.
    pub fn info(&self) -> &ExtensionInfo {
        &self.info
    }

    /// The file it was loaded from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// Its file name without extension (`_50_truncate_output`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The version of the crate that built it (`CARGO_PKG_VERSION`).
    pub fn version(&self) -> &str {
        &self.generation.version
    }

    /// Which load of its file this is: 1 for the first, one more per reload (from 1 again
    /// after the file was removed).
    pub fn generation(&self) -> u64 {
        self.generation.number
    }

    /// Runs it on JSON data; returns the new data if the extension changed it.
    pub(crate) async fn execute(
        &self,
        ctx: &Arc<CallContext>,
        data: RString,
    ) -> Result<Option<RString>, ToolError> {
        // SAFETY: as in `ToolHandle::execute`.
        let fut = unsafe { (self.ffi.vtable.execute())(self.ffi.this, ctx.to_ffi(), data) };
        settle(fut).await.map(ROption::into_option)
    }
}

impl Drop for ExtensionHandle {
    fn drop(&mut self) {
        // SAFETY: as for `ToolHandle`.
        unsafe { (self.ffi.vtable.drop())(self.ffi.this) }
    }
}

/// Awaits a plugin's future. The export glue already turns panics into errors; this also catches
/// the one async-ffi raises when a poll crossing the boundary panicked anyway (a library built
/// with other glue), so the host never unwinds from plugin code.
async fn settle<T>(fut: FfiFuture<FfiResult<T>>) -> Result<T, ToolError> {
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
        Some(result) => result.into_result().map_err(error_from_ffi),
        None => Err(ToolError::internal(
            "the plugin's future panicked across the library boundary: rebuild the plugin with plugin_api::export_tool! or export_extension!, which catch its panics",
        )),
    }
}

fn init_failed(source: &Path, e: plugin_api::__private::abi::FfiError) -> LoadError {
    LoadError::new(
        source,
        LoadErrorKind::InitFailed,
        format!("its initialisation failed: {}", error_from_ffi(e).message()),
    )
}
