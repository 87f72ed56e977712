//! Metadata a library declares about its tool or extension.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How much a tool can change: the host's approval policy keys on it.
///
/// `#[non_exhaustive]`: a later release may add a level, so a `match` needs a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum RiskLevel {
    /// Only reads; allowed by the default policy.
    Read,
    /// Changes state; allowed by the default policy. A tool that declares no risk is `write`
    /// (as in Echo Agent's registry): read-only is a promise the tool must make.
    #[default]
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
/// A tool's name is its library's file name (`tools/weather.so` is `weather`), so it is not
/// part of the metadata. Fields left empty are filled by [`export_tool!`](crate::export_tool)
/// from the plugin crate's `Cargo.toml` (`description`, `version`).
///
/// ```
/// use plugin_api::{RiskLevel, ToolInfo};
/// use serde_json::json;
///
/// let info = ToolInfo::new("Current weather for a city.")
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
    /// What the tool needs and other tags. When the tool runs sandboxed (an isolated tool of
    /// the host), these ask for rights: `read:/path`, `write:/path`, `net:PORT` (TCP connect;
    /// `net:*` any port), `bind:PORT`, `net:udp` and `exec`. The host refuses to load a
    /// sandboxed tool that asks for one its user has not granted, with one line saying how to
    /// grant it; it never grants anything because a tool asks. Any other tag (`idempotent`,
    /// `network`) is free-form: the host's `[access]` lists match them as `cap:<tag>`.
    pub capabilities: Vec<String>,
    /// What the tool can change.
    pub risk_level: RiskLevel,
    /// The plugin's version.
    pub version: String,
    /// JSON Schema of the tool's [structured content](crate::Response::structured_content),
    /// if it returns some: MCP's `outputSchema`. The host checks every structured result
    /// against it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// For the agent only (like the `response` tool that ends its loop): never offered to
    /// MCP clients.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub agent_only: bool,
    /// Served over MCP, every call is a task (the Tasks extension of MCP 2026-07-28): a
    /// 2026-07-28 client that does not declare the extension is refused with
    /// `MissingRequiredClientCapabilityError` (-32021) naming it. Clients of earlier versions
    /// (which have no such extension) and the host's own agents call it plainly.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub task_required: bool,
    /// Served over MCP to a 2026-07-28 client of the Tasks extension, a call that is to be a
    /// task first gathers its input in `InputRequiredResult` rounds, and becomes a task once
    /// it goes past its questions: the task is made when the tool has taken the last answer
    /// the client brought (in the round that answers every question asked so far), and what
    /// the tool asks after that comes through the task. A run that asks nothing new and ends
    /// in its round answers as the call would without this (a task that is already done when
    /// the tool's calls must be tasks). Without it, such a call is a task from its first
    /// round and all its questions come through the task.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub input_before_task: bool,
}

impl Default for ToolInfo {
    fn default() -> Self {
        Self {
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
            timeout_seconds: 30,
            max_retries: 0,
            stream_capable: false,
            capabilities: Vec::new(),
            risk_level: RiskLevel::Write,
            version: String::new(),
            output_schema: None,
            agent_only: false,
            task_required: false,
            input_before_task: false,
        }
    }
}

impl ToolInfo {
    /// Metadata with a description; everything else default.
    pub fn new(description: impl Into<String>) -> Self {
        Self {
            description: description.into(),
            ..Self::default()
        }
    }
    /// Sets the JSON Schema of the arguments from a typed arguments struct, derived with
    /// `#[derive(JsonSchema)]` (the `schemars` crate). Read the arguments back with
    /// [`Args::parse`](crate::Args::parse).
    ///
    /// ```
    /// use plugin_api::ToolInfo;
    /// use schemars::JsonSchema;
    /// use serde::Deserialize;
    ///
    /// /// The arguments of `weather`.
    /// #[derive(Deserialize, JsonSchema)]
    /// struct WeatherArgs {
    ///     /// The city to look up.
    ///     city: String,
    ///     /// `metric` or `imperial`.
    ///     #[serde(default)]
    ///     units: Units,
    /// }
    ///
    /// #[derive(Deserialize, serde::Serialize, JsonSchema, Default)]
    /// #[serde(rename_all = "lowercase")]
    /// enum Units { #[default] Metric, Imperial }
    ///
    /// let info = ToolInfo::new("Current weather.").parameters_for::<WeatherArgs>();
    /// assert_eq!(info.parameters["required"], serde_json::json!(["city"]));
    /// assert_eq!(info.parameters["properties"]["units"]["default"], "metric", "{:#}", info.parameters);
    /// ```
    pub fn parameters_for<T: schemars::JsonSchema>(mut self) -> Self {
        self.parameters = schemars::schema_for!(T).to_value();
        self
    }

    /// Sets the [output schema](Self::output_schema) from the type of the tool's structured
    /// content, derived with `#[derive(JsonSchema)]` as for
    /// [`parameters_for`](Self::parameters_for). Return it with
    /// [`Response::with_structured`](crate::Response::with_structured).
    ///
    /// ```
    /// use plugin_api::ToolInfo;
    ///
    /// #[derive(serde::Serialize, schemars::JsonSchema)]
    /// struct Forecast { celsius: f64, summary: String }
    ///
    /// let info = ToolInfo::new("Weather.").output_schema_for::<Forecast>();
    /// let schema = info.output_schema.unwrap();
    /// assert_eq!(schema["type"], "object");
    /// assert_eq!(schema["required"], serde_json::json!(["celsius", "summary"]));
    /// ```
    pub fn output_schema_for<T: schemars::JsonSchema>(mut self) -> Self {
        self.output_schema = Some(schemars::schema_for!(T).to_value());
        self
    }

    /// Sets the [output schema](Self::output_schema).
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// Marks the tool as the agent's only: not offered to MCP clients.
    pub fn agent_only(mut self, yes: bool) -> Self {
        self.agent_only = yes;
        self
    }

    /// Sets the JSON Schema of the arguments.
    pub fn parameters(mut self, schema: Value) -> Self {
        self.parameters = schema;
        self
    }

    /// Makes every call over MCP a task (the [`task_required`](ToolInfo#structfield.task_required) field).
    pub fn task_required(mut self, yes: bool) -> Self {
        self.task_required = yes;
        self
    }

    /// Gathers input in rounds before a call becomes a task (the
    /// [`input_before_task`](ToolInfo#structfield.input_before_task) field).
    pub fn input_before_task(mut self, yes: bool) -> Self {
        self.input_before_task = yes;
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
    /// Adds a capability tag (`"net:443"`, `"read:/data"`, `"idempotent"`: see
    /// [`capabilities`](Self::capabilities)).
    pub fn capability(mut self, tag: impl Into<String>) -> Self {
        self.capabilities.push(tag.into());
        self
    }
}

/// What an extension tells the host about itself.
///
/// Its name is its library's file name (`extensions/tool_execute_after/_50_audit.so` is
/// `_50_audit`). Fields left empty are filled by [`export_extension!`](crate::export_extension)
/// from the plugin crate's `Cargo.toml`.
///
/// ```
/// use plugin_api::ExtensionInfo;
///
/// let info = ExtensionInfo::new("Writes every tool call to an audit log.");
/// assert!(info.version.is_empty()); // filled from Cargo.toml when exported
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct ExtensionInfo {
    /// What it does (defaults to the crate description).
    pub description: String,
    /// The plugin's version.
    pub version: String,
}

impl ExtensionInfo {
    /// Metadata with a description.
    pub fn new(description: impl Into<String>) -> Self {
        Self {
            description: description.into(),
            version: String::new(),
        }
    }
}
