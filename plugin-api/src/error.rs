//! Errors a tool or extension returns, each with a kind the host acts on.

use std::fmt;

use abi_stable::std_types::RString;

use crate::abi::FfiError;

/// What kind of failure an error is; the host decides what happens next from it.
///
/// | kind | what the agent does |
/// |---|---|
/// | [`Repairable`](Self::Repairable) | shows the message to the model as a warning so it can fix its call; the loop goes on |
/// | [`Validation`](Self::Validation) | the arguments were wrong (also shown to the model) |
/// | [`Business`](Self::Business) | the tool ran and refused; not an infrastructure failure |
/// | [`Timeout`](Self::Timeout), [`Dependency`](Self::Dependency), [`Internal`](Self::Internal) | infrastructure failures: counted by governance, reported |
/// | [`Intervention`](Self::Intervention) | the user intervened; the rest of the iteration is skipped |
///
/// A panic in plugin code is reported as [`Internal`](Self::Internal) with the panic message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The model can fix this by changing its call.
    Repairable,
    /// The arguments do not match the tool's parameters.
    Validation,
    /// The tool ran and reports a domain failure.
    Business,
    /// The tool took too long.
    Timeout,
    /// Something the tool depends on failed.
    Dependency,
    /// A bug or an unexpected failure, including panics.
    Internal,
    /// The user paused, stopped or interrupted the agent.
    Intervention,
}

impl ErrorKind {
    /// The code that crosses the library boundary.
    pub const fn code(self) -> u8 {
        match self {
            Self::Repairable => 0,
            Self::Validation => 1,
            Self::Business => 2,
            Self::Timeout => 3,
            Self::Dependency => 4,
            Self::Internal => 5,
            Self::Intervention => 6,
        }
    }

    /// Decodes [`code`](Self::code); an unknown code (from a newer plugin) is `Internal`.
    pub const fn from_code(code: u8) -> Self {
        match code {
            0 => Self::Repairable,
            1 => Self::Validation,
            2 => Self::Business,
            3 => Self::Timeout,
            4 => Self::Dependency,
            6 => Self::Intervention,
            _ => Self::Internal,
        }
    }

    /// The lower-case name used in logs and JSON (`repairable`, `validation`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Repairable => "repairable",
            Self::Validation => "validation",
            Self::Business => "business",
            Self::Timeout => "timeout",
            Self::Dependency => "dependency",
            Self::Internal => "internal",
            Self::Intervention => "intervention",
        }
    }

    /// Whether this counts as an infrastructure failure (timeout, dependency, internal).
    pub const fn is_infrastructure(self) -> bool {
        matches!(self, Self::Timeout | Self::Dependency | Self::Internal)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error from a tool, a hook or an extension.
///
/// Build one with a kind-named constructor, or let `?` convert any [`std::error::Error`] into an
/// [`Internal`](ErrorKind::Internal) one:
///
/// ```
/// use plugin_api::{ErrorKind, ToolError};
///
/// fn parse(n: &str) -> Result<u32, ToolError> {
///     if n.is_empty() {
///         return Err(ToolError::repairable("argument 'n' is empty: pass a number like \"42\""));
///     }
///     Ok(n.parse::<u32>()?) // a ParseIntError becomes an internal error
/// }
/// assert_eq!(parse("").unwrap_err().kind(), ErrorKind::Repairable);
/// assert_eq!(parse("x").unwrap_err().kind(), ErrorKind::Internal);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    kind: ErrorKind,
    message: String,
}

impl ToolError {
    /// An error of the given kind.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
    /// The model can fix this by changing its call; the message tells it how.
    pub fn repairable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Repairable, message)
    }
    /// The arguments do not match the tool's parameters.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Validation, message)
    }
    /// The tool ran and reports a domain failure.
    pub fn business(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Business, message)
    }
    /// The tool took too long.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Timeout, message)
    }
    /// Something the tool depends on failed.
    pub fn dependency(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Dependency, message)
    }
    /// An unexpected failure.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }
    /// The user intervened.
    pub fn intervention(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Intervention, message)
    }
    /// The error's kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
    /// The error's message.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// Converts into the wire form.
    pub fn into_ffi(self) -> FfiError {
        FfiError {
            kind: self.kind.code(),
            message: RString::from(self.message),
        }
    }
    /// Converts from the wire form.
    pub fn from_ffi(e: FfiError) -> Self {
        Self {
            kind: ErrorKind::from_code(e.kind),
            message: e.message.into_string(),
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} error: {}", self.kind, self.message)
    }
}

/// Any standard error converts into an [`Internal`](ErrorKind::Internal) error, so `?` works.
impl<E: std::error::Error> From<E> for ToolError {
    fn from(e: E) -> Self {
        Self::internal(e.to_string())
    }
}
