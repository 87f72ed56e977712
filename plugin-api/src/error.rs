//! Errors a tool or extension returns, each with a kind the host acts on.

use std::fmt;

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
/// Build one with a kind-named constructor, or let `?` convert a common error (I/O, JSON,
/// number parsing, UTF-8, a tokio join or timeout, a boxed error) into an
/// [`Internal`](ErrorKind::Internal) one ([`Timeout`](ErrorKind::Timeout) for tokio's
/// `Elapsed`). Any other error goes through [`from_error`](Self::from_error) with the kind you
/// choose:
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
///
/// fn read_config(path: &str) -> Result<String, ToolError> {
///     // I/O failed because something outside the tool did: say so with the kind.
///     std::fs::read_to_string(path).map_err(|e| ToolError::from_error(ErrorKind::Dependency, &e))
/// }
/// assert_eq!(read_config("/no/such/file").unwrap_err().kind(), ErrorKind::Dependency);
/// ```
///
/// It is a [`std::error::Error`] itself, so it fits `Box<dyn Error>` and error-handling crates.
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
    /// An error of the given kind whose message is `error`'s text, followed by the text of
    /// each of its sources (`outer: inner: innermost`).
    pub fn from_error(kind: ErrorKind, error: &dyn std::error::Error) -> Self {
        let mut message = error.to_string();
        let mut source = error.source();
        while let Some(inner) = source {
            let text = inner.to_string();
            if !message.ends_with(&text) {
                message.push_str(": ");
                message.push_str(&text);
            }
            source = inner.source();
        }
        Self::new(kind, message)
    }
}

impl ErrorKind {
    /// The code this kind crosses the boundary as (`plugin_abi::wire::kind`).
    const fn code(self) -> u8 {
        use plugin_abi::wire::kind;
        match self {
            Self::Repairable => kind::REPAIRABLE,
            Self::Validation => kind::VALIDATION,
            Self::Business => kind::BUSINESS,
            Self::Timeout => kind::TIMEOUT,
            Self::Dependency => kind::DEPENDENCY,
            Self::Internal => kind::INTERNAL,
            Self::Intervention => kind::INTERVENTION,
        }
    }

    /// Decodes [`code`](Self::code); an unknown code (from a newer plugin) is `Internal`.
    const fn from_code(code: u8) -> Self {
        use plugin_abi::wire::kind;
        match code {
            kind::REPAIRABLE => Self::Repairable,
            kind::VALIDATION => Self::Validation,
            kind::BUSINESS => Self::Business,
            kind::TIMEOUT => Self::Timeout,
            kind::DEPENDENCY => Self::Dependency,
            kind::INTERVENTION => Self::Intervention,
            _ => Self::Internal,
        }
    }
}

/// The error in its wire form (what the export glue and a host send across the boundary).
impl From<ToolError> for plugin_abi::FfiError {
    fn from(error: ToolError) -> Self {
        plugin_abi::FfiError::new(error.kind.code(), error.message)
    }
}

/// The error from its wire form; a kind this crate does not know reads as `Internal`.
impl From<plugin_abi::FfiError> for ToolError {
    fn from(error: plugin_abi::FfiError) -> Self {
        ToolError::new(
            ErrorKind::from_code(error.kind),
            error.message.into_string(),
        )
    }
}

/// A panic of plugin code caught by the export glue: an `Internal` error with its message.
impl From<plugin_abi::guard::Panicked> for ToolError {
    fn from(panic: plugin_abi::guard::Panicked) -> Self {
        ToolError::internal(panic.0)
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} error: {}", self.kind, self.message)
    }
}

impl std::error::Error for ToolError {}

/// `From` impls for the common error types, so `?` works on them. (A blanket impl over every
/// `std::error::Error` would overlap with `ToolError`'s own `From<T> for T` now that it is an
/// error too.)
macro_rules! from_errors {
    ($($kind:ident: $($ty:ty),+;)+) => {$($(
        impl From<$ty> for ToolError {
            #[doc = concat!("A `", stringify!($ty), "` becomes a [`", stringify!($kind), "`](ErrorKind::", stringify!($kind), ") error.")]
            fn from(e: $ty) -> Self {
                Self::new(ErrorKind::$kind, e.to_string())
            }
        }
    )+)+};
}

from_errors! {
    Internal:
        std::io::Error,
        serde_json::Error,
        std::num::ParseIntError,
        std::num::ParseFloatError,
        std::num::TryFromIntError,
        std::str::Utf8Error,
        std::string::FromUtf8Error,
        std::fmt::Error,
        tokio::task::JoinError;
    Timeout:
        tokio::time::error::Elapsed;
}

/// A boxed error (what `Box<dyn Error>`-returning code gives) becomes an
/// [`Internal`](ErrorKind::Internal) error.
impl From<Box<dyn std::error::Error + Send + Sync>> for ToolError {
    fn from(e: Box<dyn std::error::Error + Send + Sync>) -> Self {
        Self::internal(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_codes_round_trip_and_unknown_is_internal() {
        for kind in [
            ErrorKind::Repairable,
            ErrorKind::Validation,
            ErrorKind::Business,
            ErrorKind::Timeout,
            ErrorKind::Dependency,
            ErrorKind::Internal,
            ErrorKind::Intervention,
        ] {
            let wire = plugin_abi::FfiError::from(ToolError::new(kind, "m"));
            assert_eq!(ToolError::from(wire), ToolError::new(kind, "m"));
        }
        let unknown = plugin_abi::FfiError::new(200, "m");
        assert_eq!(ToolError::from(unknown).kind(), ErrorKind::Internal);
    }

    #[test]
    fn common_errors_convert_with_their_kind() {
        fn io() -> Result<(), ToolError> {
            Err(std::io::Error::other("disk gone"))?
        }
        let e = io().unwrap_err();
        assert_eq!((e.kind(), e.message()), (ErrorKind::Internal, "disk gone"));

        let boxed: Box<dyn std::error::Error + Send + Sync> = "plain text".into();
        assert_eq!(ToolError::from(boxed).message(), "plain text");

        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let elapsed = rt
            .block_on(async {
                let forever = std::future::pending::<()>();
                tokio::time::timeout(std::time::Duration::from_millis(1), forever).await
            })
            .unwrap_err();
        assert_eq!(ToolError::from(elapsed).kind(), ErrorKind::Timeout);
    }

    #[test]
    fn from_error_adds_the_sources() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl fmt::Display for Outer {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("reading the cache failed")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = ToolError::from_error(
            ErrorKind::Dependency,
            &Outer(std::io::Error::other("permission denied")),
        );
        assert_eq!(e.kind(), ErrorKind::Dependency);
        assert_eq!(e.message(), "reading the cache failed: permission denied");
        let _: &dyn std::error::Error = &e;
    }
}
