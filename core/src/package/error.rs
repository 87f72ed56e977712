//! [`PackageError`]: why a package cannot be made, read, verified, installed or removed, in one
//! line that names the file (and the line and key where there is one) and what to do.

/// What went wrong with a package.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PackageErrorKind {
    /// The manifest (`toolhost-plugin.toml`) is missing, not TOML, or has a bad key or value.
    Manifest,
    /// The file is not a gzip-compressed tar archive, or is damaged.
    NotAnArchive,
    /// An archive entry that would land outside the package: `..`, an absolute path, a link,
    /// a device; or more entries or bytes than a package may unpack to (a decompression bomb).
    UnsafeArchive,
    /// A file whose SHA-256 is not the manifest's, a file the manifest does not list, or one
    /// it lists that is missing.
    Hash,
    /// No signature where one is required.
    Unsigned,
    /// A signature that is not valid, or made by a key that is not trusted.
    Signature,
    /// A key file that cannot be read or written, or a wrong password.
    Key,
    /// Built for another plugin-api contract or toolhost version than this host's.
    Compat,
    /// No library for this host's target triple.
    Target,
    /// The lock file (`usr/packages.lock`) cannot be read or written, or the package is not
    /// what it locks (`--locked`).
    Lock,
    /// No installed package of that name.
    NotInstalled,
    /// A version older than, or the same as, the installed one (`--allow-downgrade`).
    Downgrade,
    /// Signed by another key than the installed version (`--new-signer`).
    Signer,
    /// Reading, writing or renaming a file or folder failed.
    Io,
}

impl PackageErrorKind {
    /// A short lower-case name (`unsafe-archive`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Manifest => "manifest",
            Self::NotAnArchive => "not-an-archive",
            Self::UnsafeArchive => "unsafe-archive",
            Self::Hash => "hash",
            Self::Unsigned => "unsigned",
            Self::Signature => "signature",
            Self::Key => "key",
            Self::Compat => "compat",
            Self::Target => "target",
            Self::Lock => "lock",
            Self::NotInstalled => "not-installed",
            Self::Downgrade => "downgrade",
            Self::Signer => "signer",
            Self::Io => "io",
        }
    }
}

/// Why a package cannot be used: a [kind](PackageErrorKind) and one line of text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PackageError {
    /// What went wrong.
    pub kind: PackageErrorKind,
    /// One line: the file, what is wrong, and what to do.
    pub message: String,
}

impl PackageError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: PackageErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// The kind of error.
    pub fn kind(&self) -> PackageErrorKind {
        self.kind
    }

    /// An I/O error on `path`, doing `what` ("cannot read").
    pub(crate) fn io(what: &str, path: &std::path::Path, e: std::io::Error) -> Self {
        Self::new(
            PackageErrorKind::Io,
            format!("{what} {}: {e}", crate::layout::Escaped(path)),
        )
    }
}

impl From<crate::load::package_lock::PackageLockError> for PackageError {
    fn from(e: crate::load::package_lock::PackageLockError) -> Self {
        use crate::load::package_lock::PackageLockErrorKind;
        let kind = match e.kind {
            PackageLockErrorKind::Io => PackageErrorKind::Io,
            _ => PackageErrorKind::Lock,
        };
        Self::new(kind, e.message)
    }
}
