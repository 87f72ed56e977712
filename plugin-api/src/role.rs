//! Who wrote a message of the agent's history.

use serde::{Deserialize, Serialize};

/// Who wrote a message of the agent's history ([`Context::add_history`](crate::Context::add_history)).
///
/// It crosses to the host as its lower-case name ([`as_str`](Self::as_str)); the host keeps
/// the same type for its own history.
///
/// ```
/// use plugin_api::Role;
///
/// assert_eq!(Role::Warning.as_str(), "warning");
/// assert_eq!(Role::parse("assistant"), Some(Role::Ai));
/// assert_eq!(Role::parse("system"), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user.
    User,
    /// The model.
    Ai,
    /// A tool result.
    Tool,
    /// A warning shown to the model (for example a repairable error).
    Warning,
}

impl Role {
    /// Parses `user`, `ai` (or `assistant`), `tool` or `warning`.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "user" => Self::User,
            "ai" | "assistant" => Self::Ai,
            "tool" => Self::Tool,
            "warning" => Self::Warning,
            _ => return None,
        })
    }

    /// `user`, `ai`, `tool` or `warning`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Ai => "ai",
            Self::Tool => "tool",
            Self::Warning => "warning",
        }
    }
}
