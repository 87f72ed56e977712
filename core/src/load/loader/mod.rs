//! Loads plugin libraries: a private copy per load, the contract's version and layout checked,
//! and every failure turned into one clear [`LoadError`].

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use abi_stable::library::{lib_header_from_path, LibraryError};
/// The rule: plugin-abi's crate docs, "Versions and evolution".
pub use plugin_abi::version_compatible;
use plugin_abi::wire::PluginModuleRef;

use crate::load::error::{LoadError, LoadErrorKind, PrivateDirError};
use crate::load::image::{Bytes, Image};
use crate::load::layout_checks::LayoutChecks;

mod staged;
pub(crate) use staged::Staged;

/// What a host's loader did so far (see [`Host::load_stats`](crate::Host::load_stats)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadStats {
    /// Libraries mapped from an in-memory file (Linux's `memfd_create`).
    pub in_memory: u64,
    /// Libraries mapped from a file copy in a private folder (elsewhere, or as a fallback).
    pub copied: u64,
    /// abi_stable layout checks run (the library's bytes were not recorded as checked).
    pub layout_checks: u64,
    /// Layout checks skipped: the same bytes passed against this host's contract before.
    pub layout_checks_skipped: u64,
}

/// Loads libraries from private copies.
///
/// The dynamic loader hands back the image it already has for a path (or inode) it has seen, and
/// overwriting a loaded file in place crashes the process. So every load maps a private copy of
/// the bytes read: a rebuild of the original can never be confused with the image.
///
/// On Linux the copy is an anonymous in-memory file (`memfd_create`), written while the library
/// is read ([`Image::read`]), sealed against any change, and opened through `/proc/self/fd/N` (see
/// [`memfd`]): no folder, no name to clean up, a new inode each time. Where that is not
/// possible (another system, no `/proc`, memfds refused), the copy is a file with a new name in
/// a private folder, deleted once loaded (on Unix the mapping stays valid). On Linux that folder
/// is in `/dev/shm` (memory): copying there is about three times faster than to a disk-backed
/// temporary folder and writes nothing to disk. If a copy cannot be made there (a small
/// `/dev/shm` in a container), the system's temporary folder is used.
/// [`HostOptions::file_copies`](crate::HostOptions::file_copies) (`TOOLHOST_LOAD_COPY=1`)
/// always copies to a file.
///
/// A library whose bytes passed abi_stable's layout check against this host's contract before
/// is not walked again ([`LayoutChecks`]).
#[derive(Debug)]
pub struct Loader {
    private_dirs: Vec<PathBuf>,
    counter: AtomicU64,
    /// Load through an in-memory file; cleared for good when that fails where a file copy works.
    in_memory: AtomicBool,
    checks: LayoutChecks,
    /// Loads through an in-memory file, and through a file copy.
    via_memfd: AtomicU64,
    via_copy: AtomicU64,
}

impl Loader {
    /// A loader with its own private folders, recording the layout checks that pass in
    /// `checks`; with `file_copies`, never from in-memory files.
    pub fn new(checks: LayoutChecks, file_copies: bool) -> Result<Self, PrivateDirError> {
        static INSTANCE: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "toolhost-{}-{}",
            std::process::id(),
            INSTANCE.fetch_add(1, Ordering::Relaxed)
        );
        let mut private_dirs = Vec::new();
        let shm = Path::new("/dev/shm");
        remove_stale_dirs(&[shm, &std::env::temp_dir()]);
        if cfg!(target_os = "linux") && shm.is_dir() {
            if let Ok(dir) = new_dir(shm, &name) {
                private_dirs.push(dir);
            }
        }
        let temp = std::env::temp_dir();
        let tmp = new_dir(&temp, &name).map_err(|source| PrivateDirError {
            path: temp.join(&name),
            source,
        })?;
        private_dirs.push(tmp);
        Ok(Self {
            private_dirs,
            counter: AtomicU64::new(0),
            in_memory: AtomicBool::new(memfd::available() && !file_copies),
            checks,
            via_memfd: AtomicU64::new(0),
            via_copy: AtomicU64::new(0),
        })
    }

    /// Loads the library `image` (read from `path`) and checks it against this host's contract.
    /// abi_stable never unloads a library, so the module stays valid for the life of the
    /// process.
    pub(crate) fn load(&self, path: &Path, image: &Image) -> Result<Module, LoadError> {
        if self.in_memory.load(Ordering::Relaxed) {
            // Read into a sealed in-memory file already: that file is loaded. Otherwise the
            // bytes are written into a new one.
            let file = match &image.bytes {
                Bytes::Sealed(sealed) => sealed.path().map(InMemoryPath::Sealed),
                Bytes::Heap(bytes) => memfd::InMemory::new(path, bytes).map(InMemoryPath::Own),
            };
            match file {
                Ok(file) => match load_checked(file.path(), Some((&self.checks, image.hash))) {
                    // The dynamic loader could not open or map it: perhaps in-memory files
                    // may not hold code here (vm.memfd_noexec, a noexec policy). Tried again
                    // from a file copy below; if that works, this loader stops trying.
                    Err(RawLoadError::Library(LibraryError::OpenError { .. })) => {
                        drop(file);
                        let loaded = self.load_copy(path, image);
                        if loaded.is_ok() {
                            tracing::debug!(
                                "loading {} from an in-memory file failed but a file copy \
                                 worked: this host loads from file copies from now on",
                                path.display()
                            );
                            self.in_memory.store(false, Ordering::Relaxed);
                        }
                        return loaded;
                    }
                    loaded => {
                        self.via_memfd.fetch_add(1, Ordering::Relaxed);
                        return loaded.map_err(|e| classify(path, e));
                    }
                },
                Err(e) => tracing::debug!(
                    "cannot make an in-memory file for {}: {e}; copying it to a file",
                    path.display()
                ),
            }
        }
        self.load_copy(path, image)
    }

    /// [`load`](Self::load) through a private file copy.
    fn load_copy(&self, path: &Path, image: &Image) -> Result<Module, LoadError> {
        let (copy, file) = self.private_copy(path, &image.bytes)?;
        drop(file);
        self.via_copy.fetch_add(1, Ordering::Relaxed);
        let loaded =
            load_checked(&copy, Some((&self.checks, image.hash))).map_err(|e| classify(path, e));
        // The mapping stays valid on Unix; on Windows the loaded copy cannot be deleted and is
        // removed with the folder when the loader is dropped (best effort).
        let _ = fs::remove_file(&copy);
        loaded
    }

    /// Whether loads go through in-memory files (so a library is best read into one:
    /// [`Image::read`]).
    pub(crate) fn in_memory(&self) -> bool {
        self.in_memory.load(Ordering::Relaxed)
    }

    /// What this loader did so far.
    pub(crate) fn stats(&self) -> LoadStats {
        let (layout_checks, layout_checks_skipped) = self.checks.counts();
        LoadStats {
            in_memory: self.via_memfd.load(Ordering::Relaxed),
            copied: self.via_copy.load(Ordering::Relaxed),
            layout_checks,
            layout_checks_skipped,
        }
    }

    /// A private copy of `image` (read from `path`) for worker processes to load ([`Staged`]).
    pub(crate) fn stage(&self, path: &Path, image: &Image) -> Result<Staged, LoadError> {
        #[cfg(target_os = "linux")]
        {
            if self.in_memory() {
                let file = match &image.bytes {
                    Bytes::Sealed(sealed) => sealed.file(),
                    Bytes::Heap(bytes) => memfd::InMemory::new(path, bytes).map(|m| m.into_file()),
                };
                match file {
                    Ok(file) => return Ok(Staged::open(file)),
                    Err(e) => tracing::debug!(
                        "cannot make an in-memory file for {}: {e}; copying it to a file",
                        path.display()
                    ),
                }
            }
            // Open, and removed at once: workers load it through the descriptor.
            let (copy, file) = self.private_copy(path, &image.bytes)?;
            let _ = fs::remove_file(&copy);
            Ok(Staged::open(file))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let (copy, _) = self.private_copy(path, &image.bytes)?;
            Ok(Staged::at(copy))
        }
    }

    /// Writes `bytes` to a new file of mode 0600 in the first private folder that takes it;
    /// returns its path and the file, open.
    fn private_copy(&self, path: &Path, bytes: &[u8]) -> Result<(PathBuf, fs::File), LoadError> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        let mut last_error = None;
        for dir in &self.private_dirs {
            let copy = dir.join(format!("{n}-{file_name}"));
            // The folder may have been removed under us (a temp cleaner): make it again.
            let written = staged::write_private(&copy, bytes).or_else(|e| match e.kind() {
                std::io::ErrorKind::NotFound => {
                    fs::create_dir_all(dir).and_then(|()| staged::write_private(&copy, bytes))
                }
                _ => Err(e),
            });
            match written {
                Ok(file) => return Ok((copy, file)),
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

/// Creates a new folder `name` in `parent` (which is created if missing), or `name-1`,
/// `name-2`, ... where one is there already: a folder left behind is never reused. A process id
/// comes back (Wine hands out the same one at once), and on Windows a loaded library's file
/// cannot be deleted, so a host that ended leaves its folder and copies behind: writing a copy
/// into that folder would find a file of the same name.
fn new_dir(parent: &Path, name: &str) -> std::io::Result<PathBuf> {
    fs::create_dir_all(parent)?;
    let mut n = 0u32;
    loop {
        let dir = match n {
            0 => parent.join(name),
            n => parent.join(format!("{name}-{n}")),
        };
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 10_000 => n += 1,
            Err(e) => return Err(e),
        }
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
    // A worker loads one library: nothing to gain from a record, so the layout is walked.
    load_checked(copy, None).map_err(|e| classify(source, e))
}

/// A library's root module, loaded and checked.
pub(crate) struct Module {
    pub(crate) root: PluginModuleRef,
    /// The plugin-api version it was built against.
    pub(crate) contract: String,
}

#[cfg(target_os = "linux")]
pub(crate) mod memfd;
#[cfg(not(target_os = "linux"))]
pub(crate) mod memfd {
    //! In-memory files are Linux's: elsewhere every load copies to a file.
    use std::fs::File;
    use std::io;
    use std::path::{Path, PathBuf};

    pub(crate) struct Sealed(std::convert::Infallible);

    pub(crate) enum Copied {
        Sealed(Sealed, u64, u128),
        Unsupported,
    }

    impl Sealed {
        pub(crate) fn copy(_: &Path, _: &mut File, _: u64) -> io::Result<Copied> {
            Ok(Copied::Unsupported)
        }

        pub(crate) fn bytes(&self) -> &[u8] {
            match self.0 {}
        }

        pub(crate) fn path(&self) -> io::Result<PathBuf> {
            match self.0 {}
        }

        pub(crate) fn file(&self) -> io::Result<File> {
            match self.0 {}
        }
    }

    pub(super) fn available() -> bool {
        false
    }

    pub(super) struct InMemory(std::convert::Infallible);

    impl InMemory {
        pub(super) fn new(_: &Path, _: &[u8]) -> std::io::Result<Self> {
            Err(std::io::ErrorKind::Unsupported.into())
        }

        pub(super) fn path(&self) -> &Path {
            match self.0 {}
        }

        pub(super) fn into_file(self) -> File {
            match self.0 {}
        }
    }
}

/// The in-memory file a load maps: the image's own, or one written for this load.
enum InMemoryPath {
    Sealed(PathBuf),
    Own(memfd::InMemory),
}

impl InMemoryPath {
    fn path(&self) -> &Path {
        match self {
            Self::Sealed(path) => path,
            Self::Own(file) => file.path(),
        }
    }
}

/// What went wrong inside [`load_checked`], before it is worded for the user.
enum RawLoadError {
    Library(LibraryError),
    Version { found: String },
}

/// Loads the library at `file` (a private copy) and checks it: the contract version always, and
/// the layout unless `checks` (the record, and the content hash of the bytes) holds that these
/// bytes passed it against this host's contract.
fn load_checked(
    file: &Path,
    checks: Option<(&LayoutChecks, u128)>,
) -> Result<Module, RawLoadError> {
    let header = lib_header_from_path(file).map_err(RawLoadError::Library)?;
    let found = header.version_strings().version.as_str().to_owned();
    if !version_compatible(plugin_abi::ABI_VERSION, &found) {
        return Err(RawLoadError::Version { found });
    }
    let root = if checks.is_some_and(|(checks, hash)| checks.passed(hash)) {
        // SAFETY: these very bytes (same content hash) passed `init_root_module`'s layout
        // check against this host's contract (same identity, see `layout_checks`) before.
        // abi_stable's version check still runs.
        unsafe { header.init_root_module_with_unchecked_layout::<PluginModuleRef>() }
    } else {
        let root = header.init_root_module::<PluginModuleRef>();
        if let (Ok(_), Some((checks, hash))) = (&root, checks) {
            checks.record(hash);
        }
        root
    }
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
    let ours = plugin_abi::ABI_VERSION;
    // What to rebuild against: the author's crate, and the wire series it speaks.
    let series = format!(
        "plugin-api {} (plugin-abi {})",
        minor_series(plugin_api::API_VERSION),
        minor_series(ours)
    );
    let error = match error {
        RawLoadError::Version { found } => {
            return LoadError::new(
                path,
                LoadErrorKind::IncompatibleVersion,
                format!(
                    "built against plugin-abi {found}, but this host speaks plugin-abi {ours}: \
                     rebuild the plugin against {series}"
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
            "a shared library, but not a toolhost plugin (it exports no plugin-abi root module): \
             build it with plugin_api::export_tool! or export_extension!"
                .to_owned(),
        ),
        LibraryError::IncompatibleVersionNumber { actual_version, .. } => (
            LoadErrorKind::IncompatibleVersion,
            format!(
                "built against plugin-abi {actual_version}, but this host speaks plugin-abi \
                 {ours}: rebuild the plugin against {series}"
            ),
        ),
        LibraryError::ParseVersionError(_) => (
            LoadErrorKind::IncompatibleVersion,
            format!("its contract version is unreadable: rebuild it against {series}"),
        ),
        LibraryError::AbiInstability(_)
        | LibraryError::InvalidAbiHeader(_)
        | LibraryError::InvalidCAbi { .. } => (
            LoadErrorKind::IncompatibleLayout,
            format!(
                "built against an incompatible plugin-abi (the types' layout differs from \
                 {ours}): rebuild it against {series} (run with -v for the full report)"
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_folder_is_never_one_left_behind() {
        let parent = tempfile::tempdir().expect("temp dir");
        let first = new_dir(parent.path(), "toolhost-7-0").expect("first");
        fs::write(first.join("0-greet.dll"), b"left behind").expect("a leftover copy");
        let second = new_dir(parent.path(), "toolhost-7-0").expect("second");
        assert_ne!(first, second);
        assert_eq!(second, parent.path().join("toolhost-7-0-1"));
        assert_eq!(fs::read_dir(&second).expect("read").count(), 0);
        let third = new_dir(parent.path(), "toolhost-7-0").expect("third");
        assert_eq!(third, parent.path().join("toolhost-7-0-2"));
    }
}
