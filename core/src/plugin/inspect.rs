//! `toolhost inspect FILE`: what a library file is, read exactly as discovery reads it (the
//! same size cap, header checks, contract check and one-line reasons), without a host.
//!
//! ```no_run
//! let report = toolhost::inspect(std::path::Path::new("usr/tools/weather.so")).unwrap();
//! println!("{} built against plugin-abi {}", report.package, report.contract);
//! ```

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use plugin_api::{ExtensionInfo, ToolInfo};

use crate::layout::DEFAULT_MAX_LIBRARY_BYTES;
use crate::load::generation::Generation;
use crate::load::image::Image;
use crate::load::layout_checks::LayoutChecks;
use crate::load::loader::Loader;
use crate::load::LoadError;
use crate::plugin::{ExtensionHandle, ToolHandle};

/// What a library file is and declares.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// The SHA-256 of its bytes, in hex (what the audit records).
    pub sha256: String,
    /// The plugin-abi version (the wire contract) it was built against (`0.6.0`).
    pub contract: String,
    /// The crate that built it, and that crate's version.
    pub package: String,
    /// The crate's version.
    pub version: String,
    /// A tool's or an extension's metadata.
    pub kind: Declared,
}

/// A tool's or an extension's metadata.
#[derive(Debug, Clone)]
pub enum Declared {
    /// A tool (it goes in a `tools/` folder).
    Tool {
        /// Its metadata.
        info: ToolInfo,
        /// `None` if its parameters schema compiles, else why not (discovery skips it then).
        schema_error: Option<String>,
    },
    /// An extension (it goes in an `extensions/<point>/` folder).
    Extension(ExtensionInfo),
}

/// Reads and loads the library at `path` as discovery would, and reports what it declares.
/// The only plugin code that runs is what creating its instance runs (its metadata); the
/// instance is dropped before this returns.
///
/// # Errors
///
/// The [`LoadError`] discovery would give for this file (one line, with its kind).
pub fn inspect(path: &Path) -> Result<Inspection, LoadError> {
    let loader = Loader::new(LayoutChecks::new(None), false)
        .map_err(|e| LoadError::new(path, crate::load::LoadErrorKind::Io, e.to_string()))?;
    let image = Image::read(path, DEFAULT_MAX_LIBRARY_BYTES, loader.in_memory())?;
    let size = image.bytes.len() as u64;
    let sha256 = crate::load::image::sha256_hex(&image.bytes);
    let module = loader.load(path, &image)?;
    let generation = Arc::new(Generation::new(
        &module,
        path,
        1,
        Arc::new(AtomicUsize::new(0)),
    ));
    let (package, version) = (
        module.root.package().as_str().to_owned(),
        generation.version.clone(),
    );
    let kind = if module.root.new_tool().is_some() {
        let (handle, schema_error) = ToolHandle::instantiate(generation, path)?;
        Declared::Tool {
            info: handle.info().clone(),
            schema_error,
        }
    } else {
        let handle = ExtensionHandle::create(generation, path, "", "")?;
        Declared::Extension(handle.info().clone())
    };
    Ok(Inspection {
        path: path.to_owned(),
        size,
        sha256,
        contract: module.contract,
        package,
        version,
        kind,
    })
}
