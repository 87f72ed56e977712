//! Masked values: what a person, a log or the model may see.

use std::fmt;
use std::ops::Deref;

use serde::Serialize;

use plugin_api::ErrorKind;
use plugin_api::ToolError;

/// A value in which every secret value has been replaced by its `§§secret(KEY)` placeholder.
///
/// Only [`Secrets`](crate::Secrets) (and the host's own secret store) make one, so every sink
/// that a person, a log or the model reads (history, log items, session files, printed output,
/// error text, the model's stream and requests) takes a `Masked` value and cannot be handed a
/// plain `String` by mistake. (Any `Secrets` makes one, an empty set too: the type guards
/// against forgetting to mask, not against masking with the wrong secrets, so the host masks
/// again with its own where text enters the history.)
///
/// ```compile_fail
/// use toolhost::{HistoryMessage, Role};
/// // A plain String: does not compile.
/// let message = HistoryMessage::new(Role::Tool, String::from("the key is sk-12345"));
/// ```
///
/// ```
/// use toolhost::{HistoryMessage, Role, Secrets};
/// let secrets = Secrets::parse("KEY=sk-12345").unwrap();
/// let message = HistoryMessage::new(Role::Tool, secrets.mask("the key is sk-12345"));
/// assert_eq!(message.content, "the key is §§secret(KEY)");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Masked<T = String>(T);

impl<T> Masked<T> {
    /// Wraps a value that was just masked (or holds no text). Only the secrets module may.
    pub(in crate::secrets) fn new(value: T) -> Self {
        Self(value)
    }

    /// The masked value.
    pub fn get(&self) -> &T {
        &self.0
    }

    /// The masked value, owned.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl Masked<String> {
    /// The masked text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<T> Deref for Masked<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl fmt::Display for Masked<String> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for Masked<String> {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Masked<String> {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for Masked<String> {
    fn eq(&self, other: &String) -> bool {
        self.0 == *other
    }
}

/// An error whose message is masked: what the host reports to a person or a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaskedError {
    kind: ErrorKind,
    message: Masked,
}

impl MaskedError {
    pub(in crate::secrets) fn new(kind: ErrorKind, message: Masked) -> Self {
        Self { kind, message }
    }

    /// The error's kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The masked message.
    pub fn message(&self) -> &Masked {
        &self.message
    }

    /// As a [`ToolError`] (the message stays masked).
    pub fn to_tool_error(&self) -> ToolError {
        ToolError::new(self.kind, self.message.as_str())
    }
}

impl fmt::Display for MaskedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} error: {}", self.kind, self.message)
    }
}

impl std::error::Error for MaskedError {}
