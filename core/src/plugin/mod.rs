//! Safe host-side handles to the tool and extension instances a library created: a tool's
//! metadata here, its calls (in this process or its worker) in `calls.rs`, the answer and the
//! guard around plugin futures in `answer.rs`, extensions in `extension.rs`.

mod answer;
mod calls;
mod extension;
mod inspect;

pub(crate) use answer::PluginAnswer;
use answer::{init_failed, settle};
pub use extension::ExtensionHandle;
pub use inspect::{inspect, Declared, Inspection};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use plugin_abi::wire::FfiTool;
use plugin_api::ToolInfo;

use crate::governance::{ArgumentSchema, Breaker, BreakerStatus};
use crate::isolation::IsolatedTool;
use crate::layout::Escaped;
use crate::load::error::{LoadError, LoadErrorKind};
use crate::load::generation::Generation;

/// Where the code of a tool (`F` is [`FfiTool`]) or an extension runs.
enum Backend<F> {
    /// In this process: the instance, and the generation of the library that made it
    /// (dropped after the instance, which gives the plugin its instance back: shuts the
    /// library down).
    InProcess { ffi: F, generation: Arc<Generation> },
    /// In a worker process, with the number of the load it is.
    Worker(Box<IsolatedTool>, u64),
}

impl<F> Backend<F> {
    /// The instance, if it runs in this process.
    fn in_process(&self) -> Option<&F> {
        match self {
            Self::InProcess { ffi, .. } => Some(ffi),
            Self::Worker(..) => None,
        }
    }

    /// The worker process, if it is isolated.
    fn worker(&self) -> Option<&IsolatedTool> {
        match self {
            Self::Worker(isolated, _) => Some(isolated),
            Self::InProcess { .. } => None,
        }
    }

    /// The version of the crate that built it.
    fn version(&self) -> &str {
        match self {
            Self::InProcess { generation, .. } => &generation.version,
            Self::Worker(isolated, _) => &isolated.hello.version,
        }
    }

    /// The plugin-abi version it was built against.
    fn contract(&self) -> &str {
        match self {
            Self::InProcess { generation, .. } => &generation.contract,
            Self::Worker(isolated, _) => &isolated.hello.contract,
        }
    }

    /// Which load of its file this is.
    fn generation(&self) -> u64 {
        match self {
            Self::InProcess { generation, .. } => generation.number,
            Self::Worker(_, number) => *number,
        }
    }
}

/// A tool instance from a loaded library, in this process or in a worker process.
pub struct ToolHandle {
    backend: Backend<FfiTool>,
    /// The file stem: the name the tool is found by.
    name: Arc<str>,
    info: ToolInfo,
    /// `info.parameters`, compiled once for this build.
    pub(crate) schema: ArgumentSchema,
    /// This build's circuit breaker: a new build starts closed.
    pub(crate) breaker: Breaker,
    /// The file's SHA-256 for the audit, computed on first use.
    sha256: std::sync::OnceLock<Option<String>>,
    /// Its layer as the root names it (`usr`, `plugins/NAME`), made at the first call's span.
    layer: std::sync::OnceLock<Box<str>>,
    /// XXH3-128 of the bytes this build was loaded from (0 if unknown), so the SHA-256
    /// computed later is known to be of the same bytes.
    content_hash: u128,
    source: PathBuf,
    package: String,
}

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
    /// [`inspect`](crate::plugin::inspect()) to show.
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
        let info = serde_json::from_str(ffi.info()).unwrap_or_else(|e| {
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
        backend: Backend<FfiTool>,
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
            layer: std::sync::OnceLock::new(),
            content_hash: 0,
            source: source.to_owned(),
            package,
        };
        (handle, schema_error)
    }

    /// The worker process that runs this tool, if it is isolated.
    pub(crate) fn worker(&self) -> Option<&IsolatedTool> {
        self.backend.worker()
    }

    /// Whether the tool runs in a worker process (see the README, "Isolated plugins").
    pub fn is_isolated(&self) -> bool {
        self.worker().is_some()
    }

    /// Which secrets it may receive: every one in the host's process, only those granted to
    /// it by name in a worker process.
    pub(crate) fn secret_access(&self) -> crate::secrets::SecretAccess {
        self.worker()
            .map_or_else(Default::default, IsolatedTool::secret_access)
    }

    /// The sandbox its worker runs in, if it is isolated and sandboxed (see the book,
    /// "Isolated plugins").
    pub fn sandbox(&self) -> Option<ToolSandbox> {
        let worker = self.worker()?;
        let (policy, enforced, applied_in) = worker.sandbox()?;
        Some(ToolSandbox {
            enforced: enforced.to_owned(),
            applied_in: Some(applied_in),
            limits: worker.limits().map(|(text, _)| text.to_owned()),
            bounded_in: worker.limits().map(|(_, took)| took),
            ..ToolSandbox::configured(policy)
        })
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
        self.backend.version()
    }

    /// The plugin-abi version (the wire contract) it was built against.
    pub fn contract(&self) -> &str {
        self.backend.contract()
    }

    /// Which load of its file this is: 1 for the first, one more per reload (from 1 again
    /// after the file was removed).
    pub fn generation(&self) -> u64 {
        self.backend.generation()
    }

    /// Whether the tool can run now (its `readiness`); a plugin built before 0.4 is ready.
    pub fn readiness(&self) -> plugin_api::Readiness {
        let reason = match &self.backend {
            Backend::InProcess { ffi, .. } => ffi.readiness().map(|r| r.into_string()),
            Backend::Worker(isolated, _) => isolated.readiness(),
        };
        match reason {
            None => plugin_api::Readiness::Ready,
            Some(reason) => plugin_api::Readiness::not_ready(reason),
        }
    }

    /// Why the tool cannot be called now, if it cannot: not ready (its reason), or its breaker
    /// is open. Such a tool is left out of the tools prompt.
    pub fn unavailable(&self) -> Option<String> {
        if let Some(reason) = self.readiness().reason() {
            return Some(format!("not ready: {reason}"));
        }
        match self.breaker.snapshot() {
            BreakerStatus::Open { until, last } => Some(format!(
                "circuit breaker open until {} (last failure: {last})",
                crate::governance::clock(until)
            )),
            _ => None,
        }
    }

    /// Its layer as `root` names it: the folder its `tools/` folder is in (`usr`,
    /// `plugins/NAME`, `usr/agents/dev`), worked out once (a handle serves one root).
    pub(crate) fn layer_label(&self, root: &Path) -> &str {
        self.layer.get_or_init(|| {
            let relative = self.source.strip_prefix(root).unwrap_or(&self.source);
            let relative = relative.to_string_lossy();
            let layer = relative.rsplit_once("/tools/").map_or("", |(l, _)| l);
            layer.into()
        })
    }

    /// The SHA-256 of the library file (hex), as the audit records it: computed when first
    /// asked, from the file in its layer. `None` if the file can no longer be read, or if it
    /// no longer holds the bytes this build was loaded from (it was replaced since): the audit
    /// never names another build's hash.
    pub fn sha256(&self) -> Option<&str> {
        self.sha256
            .get_or_init(|| {
                let bytes = std::fs::read(&self.source).ok()?;
                let same = self.content_hash == 0
                    || xxhash_rust::xxh3::xxh3_128(&bytes) == self.content_hash;
                same.then(|| crate::load::image::sha256_hex(&bytes))
            })
            .as_deref()
    }

    /// Notes the XXH3-128 of the bytes this build was loaded from (see [`sha256`](Self::sha256)).
    pub(crate) fn loaded_from(mut self, content_hash: u128) -> Self {
        self.content_hash = content_hash;
        self
    }

    /// The state of this build's circuit breaker.
    pub fn breaker_state(&self) -> BreakerStatus {
        self.breaker.snapshot()
    }
}

/// The sandbox of an isolated tool: what the kernel enforces, and what the user granted.
/// Shown as `sandboxed; granted: net:443, read:/data` (`granted: nothing` without grants).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolSandbox {
    /// `sandboxed`, or what the kernel could not enforce where the user allowed a weaker
    /// sandbox (`[sandbox] weaker = true`).
    pub enforced: String,
    /// The grants, as written (`net:443`, `read:/data`, `exec`).
    pub grants: Vec<String>,
    /// How long the tool's first worker took to apply it (`None` before a worker has).
    pub applied_in: Option<std::time::Duration>,
    /// Its worker's limits and what enforces them: `memory 1024 MiB, CPU 600 s, 256 tasks
    /// (cgroup v1 and rlimits)` (`None` before a worker has started).
    pub limits: Option<String>,
    /// How long the host took to set up the first worker's limits (its control group).
    pub bounded_in: Option<std::time::Duration>,
}

impl ToolSandbox {
    /// The sandbox `policy` describes, before a worker enforces it.
    pub(crate) fn configured(policy: &crate::config::SandboxPolicy) -> Self {
        let mut grants: Vec<String> = policy.grants.iter().map(|(g, _)| g.to_string()).collect();
        grants.dedup();
        Self {
            enforced: "sandboxed".to_owned(),
            grants,
            applied_in: None,
            limits: None,
            bounded_in: None,
        }
    }
}

impl std::fmt::Display for ToolSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let grants = match self.grants.is_empty() {
            true => "nothing".to_owned(),
            false => self.grants.join(", "),
        };
        write!(f, "{}; granted: {grants}", self.enforced)
    }
}
