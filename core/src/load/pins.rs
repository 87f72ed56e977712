//! Pinned libraries: `usr/plugins.lock` holds the SHA-256 of every library the layers hold
//! (`toolhost pin` writes it). With `pinning = true` in `usr/toolhost.toml`, a library that the
//! lock does not list, or whose bytes changed since it was pinned, is refused with one line,
//! like any other skipped file ([`LoadErrorKind::Unpinned`](crate::LoadErrorKind::Unpinned)).
//! The files of installed packages (`usr/plugins/<name>/`) are pinned by the package lock,
//! `usr/packages.lock` ([`package_lock`](super::package_lock)): their bytes must be the ones `toolhost add`
//! installed.
//!
//! The lock is TOML, one line per library, by its path relative to the root:
//!
//! ```toml
//! [libraries]
//! "core/tools/response.so" = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//! ```
//!
//! ```
//! use toolhost::pins::PinLock;
//! use toolhost::Layout;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let root = std::env::temp_dir().join(format!("toolhost-pins-doc-{}", std::process::id()));
//! std::fs::create_dir_all(root.join("usr/tools"))?;
//! let library = format!("usr/tools/hello.{}", toolhost::LIBRARY_EXTENSION);
//! std::fs::write(root.join(&library), b"the library's bytes")?;
//! let layout = Layout::new(&root);
//! let lock = PinLock::collect(&layout, toolhost::DEFAULT_MAX_LIBRARY_BYTES)?;
//! lock.write(&layout.pins_file())?;
//! let read = PinLock::read(&layout.pins_file(), 1 << 20)?.expect("just written");
//! assert!(read.check(&library, b"the library's bytes").is_ok());
//! assert!(read.check(&library, b"other bytes").is_err());
//! # std::fs::remove_dir_all(&root)?;
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::package_lock::{Locked, PackageLock, PackageLockError};
use crate::layout::write_atomically;
use crate::layout::{library_files, read_capped, subdirs, Escaped, Layout};
use crate::load::image::sha256_hex;
use crate::load::image::Stamp;
use crate::sync::lock;

pub use crate::layout::PINS_FILE_NAME;

/// What the lock file says: the SHA-256 of each pinned library, by its path relative to the
/// root (`/`-separated).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PinLock {
    libraries: BTreeMap<String, String>,
}

/// What went wrong with pins: the lock file, or a library it does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PinErrorKind {
    /// A library to pin cannot be read.
    Unreadable,
    /// The lock file cannot be read.
    Read,
    /// The lock file is not a lock file (written again with `toolhost pin`).
    Format,
    /// The lock file cannot be written.
    Write,
    /// The library is not pinned in the lock.
    NotPinned,
    /// The library's bytes are not the ones pinned.
    Changed,
}

/// Why the lock file could not be read or written, or a library is not what it pins; the
/// message names the file and says what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinError {
    /// What went wrong.
    pub kind: PinErrorKind,
    /// One line: the file, what is wrong and what to do.
    pub message: String,
}

impl PinError {
    fn new(kind: PinErrorKind, message: String) -> Self {
        Self { kind, message }
    }
}

impl fmt::Display for PinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PinError {}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LockFile {
    libraries: BTreeMap<String, String>,
}

impl PinLock {
    /// Hashes every library file in every layer of every profile (tools and extensions).
    /// A file that cannot be read is an error naming it: a lock must not leave one out.
    pub fn collect(layout: &Layout, max_library_bytes: u64) -> Result<Self, PinError> {
        let mut libraries = BTreeMap::new();
        for path in library_paths(layout) {
            let bytes = read_capped(&path, max_library_bytes, "HostOptions::max_library_bytes")
                .map_err(|e| {
                    let message = format!("{}: cannot pin it: {e}", Escaped(&path));
                    PinError::new(PinErrorKind::Unreadable, message)
                })?;
            libraries.insert(relative(layout, &path), pin_of(&bytes.bytes));
        }
        Ok(Self { libraries })
    }

    /// Reads the lock at `path`: `None` if there is none.
    pub fn read(path: &Path, max_text_bytes: u64) -> Result<Option<Self>, PinError> {
        let text =
            match crate::layout::read_text(path, max_text_bytes, "HostOptions::max_text_bytes") {
                Ok(text) => text,
                Err(e) if e.kind == crate::layout::ReadErrorKind::Missing => return Ok(None),
                Err(e) => {
                    let message = format!("{}: {e}", Escaped(path));
                    return Err(PinError::new(PinErrorKind::Read, message));
                }
            };
        let file: LockFile = toml::from_str(&text).map_err(|e| {
            let line = e.span().map(|s| crate::layout::line_of(&text, s.start));
            let message = format!(
                "{}: not a lock file: {}; write it again with `toolhost pin`",
                crate::layout::Location::new(path, line),
                e.message()
            );
            PinError::new(PinErrorKind::Format, message)
        })?;
        Ok(Some(Self {
            libraries: file.libraries,
        }))
    }

    /// Writes the lock to `path` atomically (a new file renamed over the old one).
    pub fn write(&self, path: &Path) -> Result<(), PinError> {
        let mut libraries = toml_edit::Table::new();
        for (file, pin) in &self.libraries {
            libraries.insert(file, toml_edit::value(pin));
        }
        let mut doc = toml_edit::DocumentMut::new();
        doc.insert("libraries", toml_edit::Item::Table(libraries));
        let text = format!("{LOCK_HEADER}{doc}");
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)
            .and_then(|()| write_atomically(path, text.as_bytes()))
            .map_err(|e| {
                let message = format!("cannot write {}: {e}", Escaped(path));
                PinError::new(PinErrorKind::Write, message)
            })
    }

    /// How many libraries are pinned.
    pub fn len(&self) -> usize {
        self.libraries.len()
    }

    /// Whether no library is pinned.
    pub fn is_empty(&self) -> bool {
        self.libraries.is_empty()
    }

    /// The pinned libraries: path relative to the root, and `sha256:<hex>`.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.libraries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Whether `bytes` are what the lock pins for `relative` (a path relative to the root);
    /// the error says why not and what to do.
    pub fn check(&self, relative: &str, bytes: &[u8]) -> Result<(), PinError> {
        self.check_pin(relative, &pin_of(bytes))
    }

    /// Whether `pin` (`sha256:<hex>`) is what the lock pins for `relative`, as
    /// [`check`](Self::check) says.
    pub(crate) fn check_pin(&self, relative: &str, pin: &str) -> Result<(), PinError> {
        match self.libraries.get(relative) {
            None => Err(PinError::new(PinErrorKind::NotPinned, "it is not pinned in usr/plugins.lock (pinning is on): run `toolhost pin` if you trust it, or pass --allow-unpinned while developing".to_owned())),
            Some(pinned) if pinned == pin => Ok(()),
            Some(_) => Err(PinError::new(PinErrorKind::Changed, "its bytes changed since it was pinned in usr/plugins.lock (pinning is on): run `toolhost pin` if you trust the new build, or pass --allow-unpinned while developing".to_owned())),
        }
    }
}

/// The comment at the top of a lock file.
const LOCK_HEADER: &str = "\
# The SHA-256 of every library in the layers, written by `toolhost pin`.
# With `pinning = true` in usr/toolhost.toml, a library that is not listed here, or whose
# bytes changed, is refused. Run `toolhost pin` again after a change you trust.
";

/// `sha256:<hex>` of `bytes`.
fn pin_of(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

/// `path` relative to the root, `/`-separated (as the lock names it).
pub(crate) fn relative(layout: &Layout, path: &Path) -> String {
    let relative = path.strip_prefix(layout.root()).unwrap_or(path);
    relative.to_string_lossy().replace('\\', "/")
}

/// Every library file of every layer of every profile, each once, sorted.
fn library_paths(layout: &Layout) -> Vec<PathBuf> {
    let mut paths = std::collections::BTreeSet::new();
    for profile in layout.profiles() {
        for layer in layout.layers(&profile) {
            paths.extend(
                library_files(&layer.tools_dir())
                    .into_iter()
                    .map(|(_, p)| p),
            );
            for point in subdirs(&layer.extensions_dir()) {
                paths.extend(library_files(&point).into_iter().map(|(_, p)| p));
            }
        }
    }
    paths.into_iter().collect()
}

/// The lock as read, with the stamp its file had then.
type LockRead = (Option<Stamp>, Result<PinLock, PinError>);

/// The package lock as read, with the stamp its file had then.
type PackagesRead = (Option<Stamp>, Result<PackageLock, PackageLockError>);

impl Pins {
    /// What `usr/plugins.lock` says of `relative`, read again if its file changed.
    fn check_lock(&self, relative: &str, pin: &str) -> Result<(), String> {
        let file = self.layout.pins_file();
        let stamp = Stamp::of(&file);
        let mut read = lock(&self.read);
        if read.as_ref().is_none_or(|(s, _)| *s != stamp) {
            let lock = PinLock::read(&file, self.max_text_bytes).map(Option::unwrap_or_default);
            *read = Some((stamp, lock));
        }
        match &read.as_ref().expect("just read").1 {
            Ok(lock) => lock.check_pin(relative, pin).map_err(|e| e.message),
            Err(e) => Err(format!("pinning is on and the lock cannot be used: {e}")),
        }
    }

    /// The lock's entry of the installed package `name`, read again if its file changed:
    /// `None` if it is not installed, `Err` if the lock cannot be used.
    fn package(&self, name: &str) -> Option<Result<Locked, String>> {
        let lock_file = self.layout.packages_lock_file();
        let stamp = Stamp::of(&lock_file);
        let mut read = lock(&self.packages);
        if read.as_ref().is_none_or(|(s, _)| *s != stamp) {
            *read = Some((stamp, PackageLock::read(&lock_file)));
        }
        match &read.as_ref().expect("just read").1 {
            Ok(lock) => lock.packages.get(name).cloned().map(Ok),
            Err(e) => Some(Err(e.to_string())),
        }
    }

    /// Whether the file at `relative` belongs to an installed package whose signer is no
    /// longer trusted (its key was removed from `usr/trusted-keys/` with `toolhost trust
    /// remove`): the reason it is refused, naming the key. Checked whatever the pinning.
    fn revoked(&self, relative: &str) -> Option<String> {
        let rest = relative.strip_prefix("usr/plugins/")?;
        let (name, _) = rest.split_once('/')?;
        let package = self.package(name)?.ok()?;
        let signer = package.signer?;
        let key = self.layout.trusted_keys_dir().join(format!("{signer}.pub"));
        match std::fs::metadata(&key).is_ok_and(|m| m.is_file()) {
            true => None,
            false => Some(format!(
                "package {name} is signed by key {signer}, which is no longer trusted (not in usr/trusted-keys/): add it again signed by a trusted key, trust the key again (`toolhost trust add`), or `toolhost remove {name}`"
            )),
        }
    }

    /// What `usr/packages.lock` says of the file at `relative` (`usr/plugins/<name>/<file>`):
    /// `None` if no installed package has it (the pinning lock decides), else whether `pin`
    /// is the bytes `toolhost add` installed.
    fn installed(&self, relative: &str, pin: &str) -> Option<Result<(), String>> {
        let rest = relative.strip_prefix("usr/plugins/")?;
        let (name, file) = rest.split_once('/')?;
        let package = match self.package(name)? {
            Ok(package) => package,
            Err(e) => {
                return Some(Err(format!(
                    "pinning is on and the package lock cannot be used: {e}"
                )));
            }
        };
        let hash = package.files.get(file)?;
        match pin.strip_prefix("sha256:") == Some(hash.as_str()) {
            true => Some(Ok(())),
            false => Some(Err(format!(
                "its bytes are not the ones usr/packages.lock records for package {name} (pinning is on): reinstall it with `toolhost add` or `toolhost update {name}`, or pass --allow-unpinned while developing"
            ))),
        }
    }
}

/// The host's pin check: the lock, read again whenever its file changes.
pub(crate) struct Pins {
    layout: Layout,
    max_text_bytes: u64,
    /// Log a violation and load the library anyway (`--allow-unpinned`).
    allow_unpinned: bool,
    /// The lock as last read, with the stamp of its file then.
    read: Mutex<Option<LockRead>>,
    /// The package lock (`usr/packages.lock`) as last read, with the stamp of its file then:
    /// the files of installed packages are pinned by it.
    packages: Mutex<Option<PackagesRead>>,
    /// Refuse every library, for this reason (the configuration hides whether pinning is on).
    refuse_all: Option<String>,
    /// Whether `usr/plugins.lock` is checked (`pinning = true`).
    pinning: bool,
    /// Refuse a library under `usr/` that is not a file of an installed package (`[packages]
    /// only_installed = true`, or a mistake in `[packages]`), for this reason.
    only_installed: Option<String>,
}

impl Pins {
    pub(crate) fn new(layout: Layout, max_text_bytes: u64, allow_unpinned: bool) -> Self {
        Self {
            layout,
            max_text_bytes,
            allow_unpinned,
            read: Mutex::new(None),
            packages: Mutex::new(None),
            refuse_all: None,
            pinning: true,
            only_installed: None,
        }
    }

    /// Which checks apply: the pinning lock's (`pinning`), and whether a library under `usr/`
    /// must be a file of an installed package (`only_installed`: `Some` with the reason a
    /// library that is not is refused).
    pub(crate) fn with_checks(mut self, pinning: bool, only_installed: Option<String>) -> Self {
        self.pinning = pinning;
        self.only_installed = only_installed;
        self
    }

    /// The same check refusing every library for `reason`, whatever the lock says.
    pub(crate) fn refusing(mut self, reason: String) -> Self {
        self.refuse_all = Some(reason);
        self
    }

    /// Whether the library at `path` with `bytes` may load; the error is its "skipped" reason.
    pub(crate) fn check(&self, path: &Path, bytes: &[u8]) -> Result<(), String> {
        // The bytes are hashed only when a check needs their pin.
        self.check_with(path, || pin_of(bytes))
    }

    /// As [`check`](Self::check), for bytes whose pin (`sha256:<hex>`) is `pin`.
    pub(crate) fn check_pin(&self, path: &Path, pin: &str) -> Result<(), String> {
        self.check_with(path, || pin.to_owned())
    }

    /// As [`check`](Self::check), with the pin made by `pin` when it is needed.
    fn check_with(&self, path: &Path, pin: impl FnOnce() -> String) -> Result<(), String> {
        if let Some(reason) = &self.refuse_all {
            return match self.allow_unpinned {
                true => {
                    tracing::warn!("{}: loaded although {reason}", Escaped(path));
                    Ok(())
                }
                false => Err(reason.clone()),
            };
        }
        let relative = relative(&self.layout, path);
        // A revoked signer refuses its packages whatever else is on (not --allow-unpinned:
        // the operator removed the key).
        if let Some(reason) = self.revoked(&relative) {
            return Err(reason);
        }
        if !self.pinning && self.only_installed.is_none() {
            return Ok(());
        }
        let pin = pin();
        let pin = pin.as_str();
        let verdict = match self.installed(&relative, pin) {
            Some(verdict) => verdict,
            None if relative.starts_with("usr/") && self.only_installed.is_some() => {
                Err(self.only_installed.clone().unwrap_or_default())
            }
            None if !self.pinning => Ok(()),
            None => self.check_lock(&relative, pin),
        };
        match verdict {
            Err(reason) if self.allow_unpinned => {
                tracing::warn!("{}: loaded although {reason}", Escaped(path));
                Ok(())
            }
            verdict => verdict,
        }
    }
}
