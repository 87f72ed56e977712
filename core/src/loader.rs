//! Loads plugin libraries: a private copy per load, the contract's version and layout checked,
//! and every failure turned into one clear [`LoadError`].

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use abi_stable::library::{lib_header_from_path, LibraryError};
use plugin_api::abi::PluginModuleRef;

use crate::error::{HostError, LoadError, LoadErrorKind};

/// A loaded, checked plugin library. abi_stable never unloads a library, so the module stays
/// valid for the life of the process.
#[derive(Clone, Copy)]
pub struct LoadedModule {
    /// The library's root module.
    pub module: PluginModuleRef,
}

/// Loads libraries from private copies.
///
/// The dynamic loader hands back the image it already has for a path (or inode) it has seen, and
/// overwriting a loaded file in place crashes the process. So every load copies the file to a
/// new name in a private folder and loads that; the copy is deleted once loaded (on Unix the
/// mapping stays valid). A later rebuild of the original can never be confused with the image.
#[derive(Debug)]
pub struct Loader {
    private_dir: PathBuf,
    counter: AtomicU64,
}

impl Loader {
    /// A loader with its own private folder under the system's temporary folder.
    pub fn new() -> Result<Self, HostError> {
        static INSTANCE: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "toolhost-{}-{}",
            std::process::id(),
            INSTANCE.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&dir).map_err(|source| HostError::PrivateDir {
            path: dir.clone(),
            source,
        })?;
        Ok(Self {
            private_dir: dir,
            counter: AtomicU64::new(0),
        })
    }

    /// Loads `path` and checks it against this host's contract.
    pub fn load(&self, path: &Path) -> Result<LoadedModule, LoadError> {
        let len = fs::metadata(path)
            .map_err(|e| LoadError::new(path, LoadErrorKind::Io, format!("cannot read it: {e}")))?
            .len();
        if len == 0 {
            return Err(LoadError::new(
                path,
                LoadErrorKind::Empty,
                "the file is empty (0 bytes): rebuild the plugin or remove the file",
            ));
        }
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        let copy = self.private_dir.join(format!("{n}-{file_name}"));
        fs::copy(path, &copy).map_err(|e| {
            LoadError::new(
                path,
                LoadErrorKind::Io,
                format!("cannot copy it for loading: {e}"),
            )
        })?;
        let loaded = check_image(&copy)
            .map_err(|reason| LoadError::new(path, LoadErrorKind::NotALibrary, reason))
            .and_then(|()| load_checked(&copy).map_err(|e| classify(path, e)));
        // The mapping stays valid on Unix; on Windows the loaded copy cannot be deleted and is
        // removed with the folder when the loader is dropped (best effort).
        let _ = fs::remove_file(&copy);
        loaded
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.private_dir);
    }
}

/// Checks that the file is a complete shared library before the dynamic loader maps it: a
/// truncated library would be mapped past its end and crash the process with SIGBUS on first
/// touch, so every segment must lie inside the file.
fn check_image(path: &Path) -> Result<(), String> {
    use object::{Object, ObjectSegment};
    let file = fs::File::open(path).map_err(|e| format!("cannot read it: {e}"))?;
    let len = file
        .metadata()
        .map_err(|e| format!("cannot read it: {e}"))?
        .len();
    let cache = object::ReadCache::new(file);
    let image = object::File::parse(&cache).map_err(|e| {
        format!(
            "not a loadable shared library (truncated or corrupt?): {e}; rebuild it or remove it"
        )
    })?;
    for segment in image.segments() {
        let (offset, size) = segment.file_range();
        if offset.saturating_add(size) > len {
            return Err(format!(
                "truncated: the library needs {} bytes but the file has {len}; rebuild it or \
                 copy it again",
                offset.saturating_add(size)
            ));
        }
    }
    Ok(())
}

/// What went wrong inside [`load_checked`], before it is worded for the user.
enum RawLoadError {
    Library(LibraryError),
    Version { found: String },
}

fn load_checked(copy: &Path) -> Result<LoadedModule, RawLoadError> {
    let header = lib_header_from_path(copy).map_err(RawLoadError::Library)?;
    let found = header.version_strings().version.as_str().to_owned();
    if !version_compatible(plugin_api::API_VERSION, &found) {
        return Err(RawLoadError::Version { found });
    }
    let module = header
        .init_root_module::<PluginModuleRef>()
        .map_err(RawLoadError::Library)?;
    Ok(LoadedModule { module })
}

/// The host speaks `host`; a library built against `library` is compatible when the major
/// versions match and, while the major is 0, the minor versions match too. Patch releases only
/// append fields to prefix types, which the layout check accepts.
pub fn version_compatible(host: &str, library: &str) -> bool {
    let parse = |v: &str| -> Option<(u64, u64)> {
        let mut it = v.split('.');
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    };
    match (parse(host), parse(library)) {
        (Some((hmaj, hmin)), Some((lmaj, lmin))) => hmaj == lmaj && (hmaj != 0 || hmin == lmin),
        _ => false,
    }
}

fn minor_series(version: &str) -> String {
    let mut parts = version.split('.');
    match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) => format!("{major}.{minor}"),
        _ => version.to_owned(),
    }
}

fn classify(path: &Path, error: RawLoadError) -> LoadError {
    let ours = plugin_api::API_VERSION;
    let series = minor_series(ours);
    let error = match error {
        RawLoadError::Version { found } => {
            return LoadError::new(
                path,
                LoadErrorKind::IncompatibleVersion,
                format!(
                    "built against plugin-api {found}, but this host speaks plugin-api {ours}: \
                     rebuild the plugin against plugin-api {series}"
                ),
            );
        }
        RawLoadError::Library(e) => e,
    };
    tracing::debug!(path = %path.display(), "abi_stable's report: {error}");
    let (kind, reason) = match &error {
        LibraryError::OpenError { err, .. } => (
            LoadErrorKind::NotALibrary,
            format!(
                "not a loadable shared library (truncated or corrupt?): {}; rebuild it or remove it",
                first_line(&err.to_string())
            ),
        ),
        LibraryError::GetSymbolError { .. } => (
            LoadErrorKind::NotAPlugin,
            "a shared library, but not a toolhost plugin (it exports no plugin-api root module): \
             build it with plugin_api::export_tool! or export_extension!"
                .to_owned(),
        ),
        LibraryError::IncompatibleVersionNumber { actual_version, .. } => (
            LoadErrorKind::IncompatibleVersion,
            format!(
                "built against plugin-api {actual_version}, but this host speaks plugin-api \
                 {ours}: rebuild the plugin against plugin-api {series}"
            ),
        ),
        LibraryError::ParseVersionError(_) => (
            LoadErrorKind::IncompatibleVersion,
            format!("its contract version is unreadable: rebuild it against plugin-api {series}"),
        ),
        LibraryError::AbiInstability(_)
        | LibraryError::InvalidAbiHeader(_)
        | LibraryError::InvalidCAbi { .. } => (
            LoadErrorKind::IncompatibleLayout,
            format!(
                "built against an incompatible plugin-api (the types' layout differs from \
                 {ours}): rebuild it against plugin-api {series} (run with -v for the full report)"
            ),
        ),
        LibraryError::RootModule { err, .. } => (
            LoadErrorKind::InitFailed,
            format!("its initialisation failed: {}", first_line(&err.to_string())),
        ),
        other => (LoadErrorKind::NotAPlugin, first_line(&other.to_string()).to_owned()),
    };
    LoadError::new(path, kind, reason)
}

fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("unknown error")
}
