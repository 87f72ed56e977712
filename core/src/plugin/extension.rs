//! Extension instances from a loaded library.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::future::Future;

use plugin_abi::wire::FfiExtension;
use plugin_abi::{FfiContext, ROption, RString};
use plugin_api::{ExtensionInfo, ToolError};

use crate::isolation::protocol::{Op, Outcome};
use crate::isolation::IsolatedTool;
use crate::load::error::{LoadError, LoadErrorKind};
use crate::load::generation::Generation;

use super::{init_failed, settle, Backend};

/// An extension instance from a loaded library, in this process or in a worker process.
pub struct ExtensionHandle {
    backend: Backend<FfiExtension>,
    info: ExtensionInfo,
    source: PathBuf,
    /// The point it runs at.
    pub(crate) point: Arc<str>,
    /// Its file name without extension; the sort key.
    pub(crate) name: Arc<str>,
}

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
        let info = serde_json::from_str(ffi.info()).unwrap_or_default();
        Ok(Self {
            backend: Backend::InProcess { ffi, generation },
            info,
            source: source.to_owned(),
            point: point.into(),
            name: name.into(),
        })
    }

    /// An extension served by the worker process of `isolated`, load number `number`.
    pub(crate) fn isolated(
        isolated: IsolatedTool,
        source: &Path,
        (point, name): (&str, &str),
        number: u64,
    ) -> Self {
        let info = serde_json::from_str(&isolated.hello.info).unwrap_or_default();
        Self {
            backend: Backend::Worker(Box::new(isolated), number),
            info,
            source: source.to_owned(),
            point: point.into(),
            name: name.into(),
        }
    }

    /// Whether it runs in a worker process (see the README, "Isolated plugins").
    pub fn is_isolated(&self) -> bool {
        self.backend.worker().is_some()
    }

    /// The secrets it may receive itself, if it runs in a worker process (`None`: it runs in
    /// the host's and receives what the call's tool may).
    pub(crate) fn secret_access(&self) -> Option<crate::secrets::SecretAccess> {
        self.backend
            .worker()
            .map(crate::isolation::IsolatedTool::secret_access)
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
        self.backend.version()
    }

    /// Which load of its file this is: 1 for the first, one more per reload (from 1 again
    /// after the file was removed).
    pub fn generation(&self) -> u64 {
        self.backend.generation()
    }

    /// Runs it on JSON data; returns the new data if the extension changed it.
    pub(crate) async fn execute(
        &self,
        ctx: FfiContext,
        data: RString,
    ) -> Result<Option<RString>, ToolError> {
        match &self.backend {
            Backend::InProcess { .. } => self.execute_ffi(ctx, data).await,
            Backend::Worker(isolated, _) => {
                let op = Op::Extension(data.into_string());
                // Boxed: a round trip to another process, whose state would otherwise make
                // every in-process extension's future larger too.
                match Box::pin(isolated.call_to_end(&self.name, op, ctx)).await? {
                    Outcome::Data(changed) => Ok(changed.map(RString::from)),
                    _ => Ok(None),
                }
            }
        }
    }

    /// `execute` in this process with a context of any host (the worker's, in a worker).
    pub(crate) fn execute_ffi(
        &self,
        ctx: FfiContext,
        data: RString,
    ) -> impl Future<Output = Result<Option<RString>, ToolError>> + Send + 'static + use<> {
        let fut = self.backend.in_process().map(|ffi| ffi.execute(ctx, data));
        async move {
            match fut {
                Some(fut) => settle(fut).await.map(ROption::into_option),
                None => Err(ToolError::internal("not an in-process extension")),
            }
        }
    }
}
