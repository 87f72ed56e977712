//! Why a library file cannot be loaded: one kind and one line that names the file and says
//! what to do.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::layout::Escaped;

/// Why a library file was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LoadErrorKind {
    /// The file is empty.
    Empty,
    /// The file could not be read or copied.
    Io,
    /// The file changed while it was read: its writer has not finished.
    Changing,
    /// The dynamic loader refused the file: truncated, corrupt, or not a shared library.
    NotALibrary,
    /// A valid shared library without a plugin root module.
    NotAPlugin,
    /// Built against a `plugin-abi` (wire contract) version this host does not speak.
    IncompatibleVersion,
    /// Built against a `plugin-abi` whose types have a different layout.
    IncompatibleLayout,
    /// The library's initialisation failed or panicked.
    InitFailed,
    /// The library is a tool where an extension was expected, or the reverse.
    WrongKind,
    /// Not a regular file once links are followed: a folder, a dangling link, a link loop, a
    /// FIFO, a device, a socket, or a `/proc` file whose size does not match its content.
    NotAFile,
    /// Larger than [`HostOptions::max_library_bytes`](crate::HostOptions::max_library_bytes).
    TooLarge,
    /// The tool's parameters schema does not compile.
    BadSchema,
    /// Pinning is on, and the library is not pinned in `usr/plugins.lock` or its bytes changed
    /// since (see [`crate::load::pins`]).
    Unpinned,
    /// The tool runs sandboxed, and its sandbox cannot be applied: the kernel cannot enforce
    /// it, or a grant would open a layer folder for writing.
    Sandbox,
    /// The tool runs sandboxed and asks for a capability its user has not granted.
    NotGranted,
}

impl LoadErrorKind {
    /// A short lower-case name (`not-a-plugin`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::Io => "io",
            Self::Changing => "changing",
            Self::NotALibrary => "not-a-library",
            Self::NotAPlugin => "not-a-plugin",
            Self::IncompatibleVersion => "incompatible-version",
            Self::IncompatibleLayout => "incompatible-layout",
            Self::InitFailed => "init-failed",
            Self::WrongKind => "wrong-kind",
            Self::NotAFile => "not-a-file",
            Self::TooLarge => "too-large",
            Self::BadSchema => "bad-schema",
            Self::Unpinned => "unpinned",
            Self::Sandbox => "sandbox",
            Self::NotGranted => "not-granted",
        }
    }

    /// The kind named `name` ([`as_str`](Self::as_str)); an unknown name is `InitFailed`.
    pub(crate) fn from_name(name: &str) -> Self {
        const ALL: [LoadErrorKind; 14] = [
            LoadErrorKind::Empty,
            LoadErrorKind::Io,
            LoadErrorKind::Changing,
            LoadErrorKind::NotALibrary,
            LoadErrorKind::NotAPlugin,
            LoadErrorKind::IncompatibleVersion,
            LoadErrorKind::IncompatibleLayout,
            LoadErrorKind::InitFailed,
            LoadErrorKind::WrongKind,
            LoadErrorKind::NotAFile,
            LoadErrorKind::TooLarge,
            LoadErrorKind::BadSchema,
            LoadErrorKind::Sandbox,
            LoadErrorKind::NotGranted,
        ];
        ALL.into_iter()
            .find(|k| k.as_str() == name)
            .unwrap_or(Self::InitFailed)
    }
}

/// A library file that could not be used. The host skips it and keeps serving the rest.
///
/// Displayed as one line, `skipping <path>: <reason>`; control characters in the path are
/// escaped ([`Escaped`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The file as found in its layer.
    pub path: PathBuf,
    /// What went wrong.
    pub kind: LoadErrorKind,
    /// One line: the reason and what to do.
    pub reason: String,
}

impl LoadError {
    pub(crate) fn new(path: &Path, kind: LoadErrorKind, reason: impl Into<String>) -> Self {
        Self {
            path: path.to_owned(),
            kind,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "skipping {}: {}", Escaped(&self.path), self.reason)
    }
}

impl std::error::Error for LoadError {}

/// The private folder for a loader's library copies could not be made (a host that cannot
/// start says so with [`HostError::PrivateDir`](crate::HostError::PrivateDir)).
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot create the folder for loaded library copies {path}: {source}; point TMPDIR at a writable folder"
)]
pub struct PrivateDirError {
    pub(crate) path: PathBuf,
    #[source]
    pub(crate) source: std::io::Error,
}

impl PrivateDirError {
    /// The folder that could not be made.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}
