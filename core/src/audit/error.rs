//! The audit log's error type.

use std::path::{Path, PathBuf};

use crate::layout::Escaped;

/// What kind of audit failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AuditErrorKind {
    /// The file or its folder could not be created, opened, locked, read or written.
    Io,
    /// The log is damaged in a way the writer cannot work around. (A damaged last line no
    /// longer is: it begins a new segment.)
    Corrupt,
    /// A record could not be written as JSON.
    Encode,
    /// The key named in the configuration is missing or too short.
    Key,
    /// The log was behind its head (records deleted, the file emptied or replaced by an older
    /// copy): a `cut` record was written, then the record asked for. With `[audit] required
    /// = true` the call is refused.
    Cut,
}

impl AuditErrorKind {
    /// `io`, `corrupt`, `encode`, `key` or `cut`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Io => "io",
            Self::Corrupt => "corrupt",
            Self::Encode => "encode",
            Self::Key => "key",
            Self::Cut => "cut",
        }
    }
}

/// An audit log that could not be written or read. Displayed as one line naming the file.
#[derive(Debug, Clone, thiserror::Error)]
#[error("audit log {}: {message}", Escaped(path))]
pub struct AuditError {
    /// What kind of failure.
    pub kind: AuditErrorKind,
    /// The log file (or its folder).
    pub path: PathBuf,
    /// One line: what failed, why, and what to do.
    pub message: String,
}

impl AuditError {
    /// An error of `kind` about `path`, with its one-line message.
    pub fn new(kind: AuditErrorKind, path: &Path, message: impl Into<String>) -> Self {
        Self {
            kind,
            path: path.to_owned(),
            message: message.into(),
        }
    }

    /// An I/O error while `doing` something.
    pub(crate) fn io(path: &Path, doing: &str, error: std::io::Error) -> Self {
        Self::new(AuditErrorKind::Io, path, format!("cannot {doing}: {error}"))
    }
}
