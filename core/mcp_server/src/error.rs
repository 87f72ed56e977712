//! The MCP server's errors: a kind, and one line saying what failed.

use std::fmt;

/// What went wrong while serving MCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpServerErrorKind {
    /// The profile name is not a safe name.
    InvalidProfile,
    /// The HTTP address could not be bound.
    Bind,
    /// The MCP session failed (a transport error, or the client broke the protocol).
    Session,
    /// The plugin folders could not be watched.
    Watch,
    /// The random key that seals a call's `requestState` could not be made.
    Key,
}

impl McpServerErrorKind {
    /// A short lower-case name (`bind`, `session`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InvalidProfile => "invalid-profile",
            Self::Bind => "bind",
            Self::Session => "session",
            Self::Watch => "watch",
            Self::Key => "key",
        }
    }
}

/// An error of the MCP server.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct McpServerError {
    kind: McpServerErrorKind,
    message: String,
}

impl McpServerError {
    pub(crate) fn new(kind: McpServerErrorKind, message: impl fmt::Display) -> Self {
        Self {
            kind,
            message: message.to_string(),
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> McpServerErrorKind {
        self.kind
    }
}
