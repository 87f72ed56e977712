//! [`ConfigError`]: a configuration file that cannot be used, in one line that names the file,
//! the line and the key.

use std::path::{Path, PathBuf};

use crate::layout::{Location, ReadError, ReadErrorKind};

/// What is wrong with a configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// A folder, a FIFO, a device, a dangling link or a link loop where the file should be.
    NotAFile,
    /// Larger than [`HostOptions::max_text_bytes`](crate::HostOptions::max_text_bytes).
    TooLarge,
    /// The file could not be read (permissions, not UTF-8, changing while read).
    Io,
    /// Not valid TOML.
    Syntax,
    /// A key the schema does not have (a typo, or a key in the wrong table).
    UnknownKey,
    /// A key with a value of the wrong type or out of range (`timeout_seconds = 0`).
    InvalidValue,
    /// A profile name with characters outside `[A-Za-z0-9_.-]`.
    InvalidProfile,
    /// The file could not be written ([`save_tool_policy`](super::save_tool_policy)).
    Write,
}

impl ConfigErrorKind {
    /// A short lower-case name (`unknown-key`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::NotAFile => "not-a-file",
            Self::TooLarge => "too-large",
            Self::Io => "io",
            Self::Syntax => "syntax",
            Self::UnknownKey => "unknown-key",
            Self::InvalidValue => "invalid-value",
            Self::InvalidProfile => "invalid-profile",
            Self::Write => "write",
        }
    }
}

/// A configuration file that cannot be used.
///
/// Displayed as one line, `<file>[:<line>]: <message>` ([`Location`]), the file relative to the root when it
/// was loaded from one; control characters in the path are escaped ([`Escaped`](crate::layout::Escaped)):
///
/// ```text
/// usr/agents/dev/toolhost.toml:4: unknown key `timeout` in [calls] (expected one of: timeout_seconds, max_retries, backoff_ms, backoff_max_ms)
/// usr/toolhost.toml:9: [policy] exec = "maybe": expected "allow", "ask" or "deny"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", Location::new(file, *line))]
pub struct ConfigError {
    /// The file, as the message names it (`usr/toolhost.toml`).
    pub file: PathBuf,
    /// The line (1-based) the mistake is on, when there is one.
    pub line: Option<usize>,
    /// What is wrong.
    pub kind: ConfigErrorKind,
    /// The rest of the line: what is wrong and what is expected.
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(
        file: &Path,
        line: Option<usize>,
        kind: ConfigErrorKind,
        message: impl Into<String>,
    ) -> Self {
        Self {
            file: file.to_owned(),
            line,
            kind,
            message: message.into(),
        }
    }

    /// What is wrong.
    pub fn kind(&self) -> ConfigErrorKind {
        self.kind
    }

    /// The file could not be read (`kind` is never [`ReadErrorKind::Missing`]: a missing
    /// file means defaults).
    pub(crate) fn unreadable(file: &Path, error: &ReadError) -> Self {
        let (kind, fix) = match error.kind {
            ReadErrorKind::NotAFile => (
                ConfigErrorKind::NotAFile,
                "; remove it, or put a TOML configuration file there",
            ),
            ReadErrorKind::TooLarge => (ConfigErrorKind::TooLarge, ""),
            _ => (ConfigErrorKind::Io, ""),
        };
        Self::new(file, None, kind, format!("{error}{fix}"))
    }
}
