//! Metadata a library declares about its tool or extension.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How much a tool can change: the host's approval policy keys on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RiskLevel {
    /// Only reads; always allowed.
    #[default]
    Read,
    /// Changes state; allowed per policy.
    Write,
    /// Executes arbitrary code or commands; usually needs a human.
    Exec,
}

impl RiskLevel {
    /// `read`, `write` or `exec`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Exec => "exec",
        }
    }
}

/// What a tool tells the host and the model about itself.
///
/// Fields left empty are filled by [`export_tool!`](crate::export_tool) from the plugin crate's
/// `Cargo.toml` (`name`, `description`, `version`).
///
/// ```
/// use plugin_api::{RiskLevel, ToolInfo};
/// use serde_json::json;
///
/// let info = ToolInfo::new("weather", "Current weather for a city.")
///     .parameters(json!({
///         "type": "object",
///         "properties": {"city": {"type": "string"}},
///         "required": ["city"]
///     }))
///     .timeout_seconds(10)
///     .risk(RiskLevel::Read);
/// assert_eq!(info.max_retries, 0);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct ToolInfo {
    /// The tool's name (the library's file name decides lookup; this is informative).
    pub name: String,
    /// One or two sentences for the model and for `list`.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
    /// How long one attempt may run.
    pub timeout_seconds: u64,
    /// Attempts after the first that governance may make.
    pub max_retries: u32,
    /// Whether the tool reports progress while it runs.
    pub stream_capable: bool,
    /// Free-form capability tags (`"network"`, `"filesystem"`, ...).
    pub capabilities: Vec<String>,
    /// What the tool can change.
    pub risk_level: RiskLevel,
    /// The plugin's version.
    pub version: String,
}

impl Default for ToolInfo {
    fn default() -> Self {
        Self {
            name: String::new(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
            timeout_seconds: 30,
            max_retries: 0,
            stream_capable: false,
            capabilities: Vec::new(),
            risk_level: RiskLevel::Read,
            version: String::new(),
        }
    }
}

impl ToolInfo {
    /// Metadata with a name and description; everything else default.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            ..Self::default()
        }
    }
    /// Sets the JSON Schema of the arguments.
    pub fn parameters(mut self, schema: Value) -> Self {
        self.parameters = schema;
        self
    }
    /// Sets the timeout of one attempt.
    pub fn timeout_seconds(mut self, seconds: u64) -> Self {
        self.timeout_seconds = seconds;
        self
    }
    /// Sets the number of retries.
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }
    /// Sets the risk level.
    pub fn risk(mut self, risk: RiskLevel) -> Self {
        self.risk_level = risk;
        self
    }
    /// Marks the tool as reporting progress.
    pub fn stream_capable(mut self, yes: bool) -> Self {
        self.stream_capable = yes;
        self
    }
    /// Adds a capability tag.
    pub fn capability(mut self, tag: impl Into<String>) -> Self {
        self.capabilities.push(tag.into());
        self
    }
}

/// What an extension tells the host about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct ExtensionInfo {
    /// A short name (defaults to the crate name).
    pub name: String,
    /// What it does (defaults to the crate description).
    pub description: String,
    /// The plugin's version.
    pub version: String,
}

impl ExtensionInfo {
    /// Metadata with a name and description.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            version: String::new(),
        }
    }
}
