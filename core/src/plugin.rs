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
use plugin_api::__private::abi::{FfiContext, FfiExtension, FfiResponse, FfiTool};
use plugin_api::{ExtensionInfo, Response, ToolError, ToolInfo};

use crate::context::CallContext;
use crate::error::{LoadError, LoadErrorKind};
use crate::generation::Generation;
use crate::governance::{ArgumentSchema, Breaker, BreakerState};
use crate::isolation::protocol::{Op, WireResponse};
use crate::isolation::IsolatedTool;
use crate::layout::Escaped;

/// Where a tool's code runs.
enum Backend {
    /// In this process: the instance, and the generation of the library that made it
    /// (dropped after the instance: shuts the library down).
    InProcess {
        ffi: FfiTool,
        generation: Arc<Generation>,
    },
    /// In a worker process, with the number of the load it is.
    Worker(Box<IsolatedTool>, u64),
}

/// A tool instance from a loaded library, in this process or in a worker process.
pub struct ToolHandle {
    backend: Backend,
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
        let package = module.package().as_str().to_owned();
        let backend = Backend::InProcess { ffi, generation };
        Ok(Self::with_backend(backend, source, info, package))
    }

    /// A tool served by the worker process of `isolated`, load number `number` of `source`.
    pub(crate) fn isolated(
        isolated: IsolatedTool,
        source: &Path,
        number: u64,
    ) -> Result<Self, LoadError> {
        let hello = &isolated.hello;
        let info = serde_json::from_str(&hello.info).unwrap_or_else(|e| {
            tracing::warn!(
                "{}: unreadable tool metadata ({e}); using defaults",
                Escaped(source)
            );
            ToolInfo::default()
        });
        let package = hello.package.clone();
        let backend = Backend::Worker(Box::new(isolated), number);
        match Self::with_backend(backend, source, info, package) {
            (handle, None) => Ok(handle),
            (_, Some(e)) => Err(LoadError::new(source, LoadErrorKind::BadSchema, e)),
        }
    }

    fn with_backend(
        backend: Backend,
        source: &Path,
        info: ToolInfo,
        package: String,
    ) -> (Self, Option<String>) {
        let (schema, schema_error) = match ArgumentSchema::compile(&info.parameters) {
            Ok(schema) => (schema, None),
            Err(e) => (ArgumentSchema::any(), Some(e)),
        };
        let name = source
            .file_stem()
            .map(|s| s.to_string_lossy())
            .unwrap_or_default();
        let handle = Self {
            backend,
            name: name.as_ref().into(),
            info,
            schema,
            breaker: Breaker::default(),
            sha256: std::sync::OnceLock::new(),
            source: source.to_owned(),
            package,
        };
        (handle, schema_error)
    }

    /// The worker process that runs this tool, if it is isolated.
    pub(crate) fn worker(&self) -> Option<&IsolatedTool> {
        match &self.backend {
            Backend::Worker(isolated, _) => Some(isolated),
            Backend::InProcess { .. } => None,
        }
    }

    /// Whether the tool runs in a worker process (see the README, "Isolated plugins").
    pub fn is_isolated(&self) -> bool {
        self.worker().is_some()
    }

    /// The process id of the tool's worker, if it is isolated and its worker runs.
    pub fn worker_pid(&self) -> Option<u32> {
        self.worker().and_then(IsolatedTool::worker_pid)
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
        match &self.backend {
            Backend::InProcess { generation, .. } => &generation.version,
            Backend::Worker(isolated, _) => &isolated.hello.version,
        }
    }

    /// The plugin-api version it was built against.
    pub fn contract(&self) -> &str {
        match &self.backend {
            Backend::InProcess { generation, .. } => &generation.contract,
            Backend::Worker(isolated, _) => &isolated.hello.contract,
        }
    }

    /// Which load of its file this is: 1 for the first, one more per reload (from 1 again
    /// after the file was removed).
    pub fn generation(&self) -> u64 {
        match &self.backend {
            Backend::InProcess { generation, .. } => generation.number,
            Backend::Worker(_, number) => *number,
        }
    }

    /// Whether the tool can run now (its `readiness`); a plugin built before 0.4 is ready.
    pub fn readiness(&self) -> plugin_api::Readiness {
        let ffi = match &self.backend {
            Backend::InProcess { ffi, .. } => ffi,
            Backend::Worker(isolated, _) => {
                return match isolated.readiness() {
                    None => plugin_api::Readiness::Ready,
                    Some(reason) => plugin_api::Readiness::NotReady(reason),
                }
            }
        };
        let Some(readiness) = ffi.vtable.readiness() else {
            return plugin_api::Readiness::Ready;
        };
        // SAFETY: `this` is ours until drop; the glue catches the plugin's panics.
        match unsafe { readiness(ffi.this) } {
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
        match &self.backend {
            Backend::InProcess { ffi, .. } => ffi.vtable.before_execution().is_some(),
            Backend::Worker(isolated, _) => isolated.hello.before_hook,
        }
    }

    pub(crate) fn has_after_hook(&self) -> bool {
        match &self.backend {
            Backend::InProcess { ffi, .. } => ffi.vtable.after_execution().is_some(),
            Backend::Worker(isolated, _) => isolated.hello.after_hook,
        }
    }

    pub(crate) fn has_readiness(&self) -> bool {
        match &self.backend {
            Backend::InProcess { ffi, .. } => ffi.vtable.readiness().is_some(),
            Backend::Worker(isolated, _) => isolated.hello.readiness,
        }
    }

    /// Runs `op` in the tool's worker, with no deadline (the hooks, and `execute_bare`).
    async fn in_worker(
        &self,
        isolated: &IsolatedTool,
        op: Op,
        ctx: &Arc<CallContext>,
    ) -> Result<Option<WireResponse>, ToolError> {
        let never = std::future::pending();
        match isolated.call(&self.name, op, ctx, None, never).await {
            Ok(answer) => Ok(answer),
            Err(Ok(e)) => Err(e),
            Err(Err(_)) => Err(ToolError::internal("the call was stopped")),
        }
    }

    pub(crate) async fn execute(
        &self,
        ctx: &Arc<CallContext>,
        args: String,
    ) -> Result<PluginAnswer, ToolError> {
        match &self.backend {
            Backend::InProcess { .. } => self.execute_ffi(ctx.to_ffi(), args).await,
            Backend::Worker(isolated, _) => {
                let answer = self.in_worker(isolated, Op::Execute(args), ctx).await?;
                Ok(PluginAnswer::from_wire(answer.unwrap_or_default()))
            }
        }
    }

    /// `execute` in this process with a context of any host (the worker's, in a worker).
    pub(crate) fn execute_ffi(
        &self,
        ctx: FfiContext,
        args: String,
    ) -> impl Future<Output = Result<PluginAnswer, ToolError>> + Send + 'static {
        let fut = match &self.backend {
            // SAFETY: `this` is ours until drop; the context reference is handed over.
            Backend::InProcess { ffi, .. } => {
                Some(unsafe { (ffi.vtable.execute())(ffi.this, ctx, RString::from(args)) })
            }
            Backend::Worker(..) => None,
        };
        async move {
            match fut {
                Some(fut) => settle(fut).await.map(PluginAnswer),
                None => Err(ToolError::internal("not an in-process tool")),
            }
        }
    }

    pub(crate) async fn before_execution(
        &self,
        ctx: &Arc<CallContext>,
        args: String,
    ) -> Result<(), ToolError> {
        match &self.backend {
            Backend::InProcess { .. } => self.before_ffi(ctx.to_ffi(), args).await,
            Backend::Worker(isolated, _) => self
                .in_worker(isolated, Op::Before(args), ctx)
                .await
                .map(drop),
        }
    }

    /// The tool's own `before_execution` in this process, with a context of any host.
    pub(crate) fn before_ffi(
        &self,
        ctx: FfiContext,
        args: String,
    ) -> impl Future<Output = Result<(), ToolError>> + Send + 'static {
        let hook = match &self.backend {
            Backend::InProcess { ffi, .. } => ffi
                .vtable
                .before_execution()
                .into_option()
                .map(|hook| (hook, ffi.this)),
            Backend::Worker(..) => None,
        };
        // SAFETY: as in `execute_ffi`; without a hook the reference is given back.
        let fut = match hook {
            Some((hook, this)) => Some(unsafe { hook(this, ctx, RString::from(args)) }),
            None => {
                drop(unsafe { plugin_api::__private::abi::context_from_ffi(ctx) });
                None
            }
        };
        async move {
            match fut {
                Some(fut) => settle(fut).await,
                None => Ok(()),
            }
        }
    }

    pub(crate) async fn after_execution(
        &self,
        ctx: &Arc<CallContext>,
        response: &Response,
    ) -> Result<(), ToolError> {
        let response = response_to_ffi(response.clone());
        match &self.backend {
            Backend::InProcess { .. } => self.after_ffi(ctx.to_ffi(), response).await,
            Backend::Worker(isolated, _) => {
                let op = Op::After(response.into());
                self.in_worker(isolated, op, ctx).await.map(drop)
            }
        }
    }

    /// The tool's own `after_execution` in this process, with a context of any host.
    pub(crate) fn after_ffi(
        &self,
        ctx: FfiContext,
        response: FfiResponse,
    ) -> impl Future<Output = Result<(), ToolError>> + Send + 'static {
        let hook = match &self.backend {
            Backend::InProcess { ffi, .. } => ffi
                .vtable
                .after_execution()
                .into_option()
                .map(|hook| (hook, ffi.this)),
            Backend::Worker(..) => None,
        };
        // SAFETY: as in `execute_ffi`; without a hook the reference is given back.
        let fut = match hook {
            Some((hook, this)) => Some(unsafe { hook(this, ctx, response) }),
            None => {
                drop(unsafe { plugin_api::__private::abi::context_from_ffi(ctx) });
                None
            }
        };
        async move {
            match fut {
                Some(fut) => settle(fut).await,
                None => Ok(()),
            }
        }
    }
}

impl Drop for ToolHandle {
    fn drop(&mut self) {
        if let Backend::InProcess { ffi, .. } = &self.backend {
            // SAFETY: gives back the instance reference `new_tool` returned, once.
            unsafe { (ffi.vtable.drop())(ffi.this) }
        }
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

    /// An answer that came from a worker process.
    pub(crate) fn from_wire(answer: WireResponse) -> Self {
        Self(answer.into())
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
