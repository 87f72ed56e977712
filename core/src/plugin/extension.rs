//! Extension instances from a loaded library.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use abi_stable::std_types::{ROption, RString};
use plugin_api::__private::abi::FfiExtension;
use plugin_api::{ExtensionInfo, ToolError};

use crate::context::CallContext;
use crate::error::{LoadError, LoadErrorKind};
use crate::generation::Generation;

use super::{init_failed, settle};

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
