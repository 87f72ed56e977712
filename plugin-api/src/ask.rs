//! What a tool asks of whoever its call is served to, through [`Context::log`],
//! [`Context::elicit`] and [`Context::sample`](crate::Context::sample): the requests and their
//! answers, as they cross to the host (JSON).
//!
//! Served over MCP, a log message is a `notifications/message` (sent when its level is at or
//! above the one the client set with `logging/setLevel`), an elicitation an
//! `elicitation/create` and a sampling a `sampling/createMessage` to the client. Elsewhere a
//! log message goes to the host's log, and a question nobody can answer is refused with a
//! `dependency` error that says so.
//!
//! [`Context::log`]: crate::Context::log
//! [`Context::elicit`]: crate::Context::elicit

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The level of a log message: syslog's, as MCP uses them, least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum LogLevel {
    /// Detail for debugging.
    Debug,
    /// Normal operation.
    Info,
    /// Normal but significant.
    Notice,
    /// Something may be wrong.
    Warning,
    /// Something failed.
    Error,
    /// A critical condition.
    Critical,
    /// Action must be taken at once.
    Alert,
    /// The system is unusable.
    Emergency,
}

impl LogLevel {
    /// `debug`, `info`, ... `emergency`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Notice => "notice",
            Self::Warning => "warning",
            Self::Error => "error",
            Self::Critical => "critical",
            Self::Alert => "alert",
            Self::Emergency => "emergency",
        }
    }
}

/// One request of a plugin to whoever its call is served to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "ask", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Ask {
    /// A log message.
    Log {
        /// Its level.
        level: LogLevel,
        /// The text.
        message: String,
    },
    /// Questions for the user: a form whose fields a JSON Schema gives.
    Elicit {
        /// What is asked, and why.
        message: String,
        /// An object schema of flat fields (strings, numbers, integers, booleans, enums), as
        /// MCP's `requestedSchema`.
        schema: Value,
        /// The question's key in a 2026-07-28 client's `inputRequests` (unique within the
        /// call); `None`: `elicit-1`, `elicit-2`, ... in the order asked.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
    },
    /// A completion by a model.
    Sample(SampleRequest),
    /// The client's roots (the folders and files it shares, MCP `roots/list`).
    Roots {
        /// The question's key in a 2026-07-28 client's `inputRequests`; `None`: `roots-1`, ...
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
    },
}

/// One root of the client: a folder or file it shares with the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Root {
    /// Its URI (`file:///home/ada/project`).
    pub uri: String,
    /// A name for people, if the client gave one.
    #[serde(default)]
    pub name: Option<String>,
}

impl Root {
    /// A root at `uri`.
    pub fn new(uri: impl Into<String>, name: Option<String>) -> Self {
        Self {
            uri: uri.into(),
            name,
        }
    }
}

/// What the user did with an elicitation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ElicitAction {
    /// Answered: the content holds the fields.
    Accept,
    /// Said no.
    Decline,
    /// Dismissed it without choosing.
    Cancel,
}

/// The answer to an elicitation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Elicited {
    /// What the user did.
    pub action: ElicitAction,
    /// The fields, when the user accepted.
    #[serde(default)]
    pub content: Option<Map<String, Value>>,
}

impl Elicited {
    /// An answer with `action` and `content`.
    pub fn new(action: ElicitAction, content: Option<Map<String, Value>>) -> Self {
        Self { action, content }
    }
}

/// Who said a message of a sampling conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum SampleRole {
    /// The user.
    User,
    /// The model.
    Assistant,
}

/// One message of a sampling conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SampleMessage {
    /// Who said it.
    pub role: SampleRole,
    /// What was said.
    pub text: String,
}

impl SampleMessage {
    /// A message of the user.
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: SampleRole::User,
            text: text.into(),
        }
    }
}

/// A completion asked of a model: the conversation so far and the bounds of the answer.
///
/// ```
/// use plugin_api::ask::SampleRequest;
/// let request = SampleRequest::new("Name a colour.", 20).with_system_prompt("Answer in one word.");
/// assert_eq!(request.max_tokens, 20);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SampleRequest {
    /// The conversation.
    pub messages: Vec<SampleMessage>,
    /// The most tokens the answer may have.
    pub max_tokens: u32,
    /// The system prompt, if any.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// The question's key in a 2026-07-28 client's `inputRequests` (unique within the call);
    /// `None`: `sample-1`, `sample-2`, ... in the order asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl SampleRequest {
    /// One user message, and the answer's bound in tokens.
    pub fn new(prompt: impl Into<String>, max_tokens: u32) -> Self {
        Self {
            messages: vec![SampleMessage::user(prompt)],
            max_tokens,
            system_prompt: None,
            key: None,
        }
    }

    /// Sets the question's key in a 2026-07-28 client's `inputRequests`.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the system prompt.
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }
}

/// A model's completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Sampled {
    /// Its text.
    pub text: String,
    /// The model that wrote it.
    pub model: String,
    /// Why it stopped (`endTurn`, `maxTokens`, ...), if said.
    #[serde(default)]
    pub stop_reason: Option<String>,
}

impl Sampled {
    /// A completion of `model`.
    pub fn new(text: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            model: model.into(),
            stop_reason: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_are_tagged_json() {
        let log = Ask::Log {
            level: LogLevel::Warning,
            message: "m".into(),
        };
        assert_eq!(
            serde_json::to_value(&log).unwrap(),
            json!({"ask": "log", "level": "warning", "message": "m"})
        );
        let sample = Ask::Sample(SampleRequest::new("p", 5));
        let json = serde_json::to_value(&sample).unwrap();
        assert_eq!(json["ask"], "sample");
        assert_eq!(json["messages"][0], json!({"role": "user", "text": "p"}));
        assert_eq!(serde_json::from_value::<Ask>(json).unwrap(), sample);
        assert!(LogLevel::Debug < LogLevel::Info && LogLevel::Alert < LogLevel::Emergency);
    }
}
