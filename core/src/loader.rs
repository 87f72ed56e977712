//! Loads plugin libraries: a private copy per load, the contract's version and layout checked,
//! and every failure turned into one clear [`LoadError`].

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use abi_stable::library::{lib_header_from_path, LibraryError};
use plugin_api::__private::abi::PluginModuleRef;
/// The rule: plugin-api's crate docs, "Versions and evolution".
pub use plugin_api::__private::version_compatible;

use crate::error::{HostError, LoadError, LoadErrorKind};
use crate::image::Image;

/// Loads libraries from private copies.
///
/// The dynamic loader hands back the image it already has for a path (or inode) it has seen, and
/// overwriting a loaded file in place crashes the process. So every load copies the file to a
/// new name in a private folder and loads that; the copy is deleted once loaded (on Unix the
/// mapping stays valid). A later rebuild of the original can never be confused with the image.
///
/// On Linux the private folder is in `/dev/shm` (memory): copying there is about three times
/// faster than to a disk-backed temporary folder and writes nothing to disk. If a copy cannot be
/// made there (a small `/dev/shm` in a container), the system's temporary folder is used.
#[derive(Debug)]
pub struct Loader {
    private_dirs: Vec<PathBuf>,
    counter: AtomicU64,
}

impl Loader {
    /// A loader with its own private folders.
    pub fn new() -> Result<Self, HostError> {
        static INSTANCE: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "toolhost-{}-{}",
            std::process::id(),
            INSTANCE.fetch_add(1, Ordering::Relaxed)
        );
        let mut private_dirs = Vec::new();
        let shm = Path::new("/dev/shm");
        remove_stale_dirs(&[shm, &std::env::temp_dir()]);
        if cfg!(target_os = "linux") && shm.is_dir() && fs::create_dir(shm.join(&name)).is_ok() {
            private_dirs.push(shm.join(&name));
        }
        let tmp = std::env::temp_dir().join(&name);
        fs::create_dir_all(&tmp).map_err(|source| HostError::PrivateDir {
            path: tmp.clone(),
            source,
        })?;
        private_dirs.push(tmp);
        Ok(Self {
            private_dirs,
            counter: AtomicU64::new(0),
        })
    }

    /// Loads the library `image` (read from `path`) and checks it against this host's contract.
    /// abi_stable never unloads a library, so the module stays valid for the life of the
    /// process.
    pub(crate) fn load(&self, path: &Path, image: &Image) -> Result<Module, LoadError> {
        let copy = self.private_copy(path, &image.bytes)?;
        let loaded = load_checked(&copy).map_err(|e| classify(path, e));
        // The mapping stays valid on Unix; on Windows the loaded copy cannot be deleted and is
        // removed with the folder when the loader is dropped (best effort).
        let _ = fs::remove_file(&copy);
        loaded
    }

    /// A private copy of `image` (read from `path`) for a worker process to load; the caller
    /// deletes it when no worker needs it any more.
    pub(crate) fn stage(&self, path: &Path, image: &Image) -> Result<PathBuf, LoadError> {
        self.private_copy(path, &image.bytes)
    }

    /// Writes `bytes` to a new file in the first private folder that takes it.
    fn private_copy(&self, path: &Path, bytes: &[u8]) -> Result<PathBuf, LoadError> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        let mut last_error = None;
        for dir in &self.private_dirs {
            let copy = dir.join(format!("{n}-{file_name}"));
            // The folder may have been removed under us (a temp cleaner): make it again.
            let written = fs::write(&copy, bytes).or_else(|e| match e.kind() {
                std::io::ErrorKind::NotFound => {
                    fs::create_dir_all(dir).and_then(|()| fs::write(&copy, bytes))
                }
                _ => Err(e),
            });
            match written {
                Ok(()) => return Ok(copy),
                Err(e) => {
                    let _ = fs::remove_file(&copy);
                    last_error = Some(e);
                }
            }
        }
        let e = last_error.map_or_else(|| "no private folder".to_owned(), |e| e.to_string());
        Err(LoadError::new(
            path,
            LoadErrorKind::Io,
            format!("cannot copy it for loading: {e}"),
        ))
    }
}

/// Removes the private folders of hosts that are gone (a host that crashed mid-load leaves its
/// copy behind, and in `/dev/shm` that is memory). Linux only: a process is alive while
/// `/proc/<pid>` exists.
fn remove_stale_dirs(parents: &[&Path]) {
    if !cfg!(target_os = "linux") {
        return;
    }
    for parent in parents {
        let Ok(entries) = fs::read_dir(parent) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix("toolhost-"))
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        for dir in &self.private_dirs {
            let _ = fs::remove_dir_all(dir);
        }
    }
}

/// Loads a private copy made by [`Loader::stage`] (in a worker process), with the same checks
/// and the same errors as [`Loader::load`]; `source` is the file as found in its layer.
pub(crate) fn load_staged(copy: &Path, source: &Path) -> Result<Module, LoadError> {
    load_checked(copy).map_err(|e| classify(source, e))
}

/// A library's root module, loaded and checked.
pub(crate) struct Module {
    pub(crate) root: PluginModuleRef,
    /// The plugin-api version it was built against.
    pub(crate) contract: String,
}

/// What went wrong inside [`load_checked`], before it is worded for the user.
enum RawLoadError {
    Library(LibraryError),
    Version { found: String },
}

fn load_checked(copy: &Path) -> Result<Module, RawLoadError> {
    let header = lib_header_from_path(copy).map_err(RawLoadError::Library)?;
    let found = header.version_strings().version.as_str().to_owned();
    if !version_compatible(plugin_api::API_VERSION, &found) {
        return Err(RawLoadError::Version { found });
    }
    let root = header
        .init_root_module::<PluginModuleRef>()
        .map_err(RawLoadError::Library)?;
    Ok(Module {
        root,
        contract: found,
    })
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
    let (kind, reason) = describe(&error, ours, &series);
    LoadError::new(path, kind, reason)
}

/// What abi_stable's refusal means for the user, and what to do about it.
fn describe(error: &LibraryError, ours: &str, series: &str) -> (LoadErrorKind, String) {
    match error {
        // The headers were already checked, so this is the dynamic loader's own refusal.
        LibraryError::OpenError { err, .. } => (
            LoadErrorKind::NotALibrary,
            format!(
                "the dynamic loader refused it: {}; check that it was built for this platform \
                 and that its dependencies are installed (ldd), or rebuild it",
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
            format!(
                "its initialisation failed: {}",
                first_line(&err.to_string())
            ),
        ),
        other => (
            LoadErrorKind::NotAPlugin,
            first_line(&other.to_string()).to_owned(),
        ),
    }
}

fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("unknown error")
}
