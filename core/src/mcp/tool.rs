//! One tool of an MCP server, as the host governs it: its qualified name `<server>.<tool>`,
//! metadata derived from its description, `inputSchema` and annotations, the compiled schema
//! and a circuit breaker that outlives refreshes of the server's tool list.

use std::sync::{Arc, Weak};

use plugin_api::{RiskLevel, ToolInfo};
use rmcp::model::Tool;

use super::server::Server;
use crate::governance::{ArgumentSchema, Breaker, BreakerStatus};
use crate::Secrets;

/// A call's deadline when the config sets none (Echo Agent's default).
pub(crate) const DEFAULT_TIMEOUT_SECONDS: u64 = 30;

/// A tool an MCP server offers.
pub struct McpTool {
    /// `<server>.<tool>`: the name the model calls it by.
    pub(crate) name: Arc<str>,
    /// The tool's own name on its server.
    pub(crate) remote: String,
    /// The server's name.
    pub(crate) server_name: Arc<str>,
    pub(crate) server: Weak<Server>,
    pub(crate) info: ToolInfo,
    /// Shared with its masked copies ([`masked`](Self::masked)): calls validate against the
    /// schema as the server sent it.
    pub(crate) schema: Arc<ArgumentSchema>,
    pub(crate) breaker: Arc<Breaker>,
    /// Whether it declares an `outputSchema`: its structured content is then what the model
    /// gets when a text block says the same.
    pub(crate) output_schema: bool,
}

impl McpTool {
    /// The tool of `server` described by `tool`; `Err` says why it cannot be offered (a name
    /// the host cannot call, a schema that does not compile).
    pub(crate) fn new(
        server: &Arc<Server>,
        tool: &Tool,
        breaker: Arc<Breaker>,
    ) -> Result<Self, String> {
        let remote = tool.name.to_string();
        let name = format!("{}.{remote}", server.config.name);
        if !crate::is_safe_name(&remote) {
            return Err(format!(
                "tool '{}' is left out: the host calls tools by names of letters, digits, '_', '-' and '.'",
                remote.escape_debug()
            ));
        }
        let parameters = serde_json::Value::Object((*tool.input_schema).clone());
        let schema = ArgumentSchema::compile(&parameters)
            .map_err(|e| format!("tool '{remote}' is left out: {e}"))?;
        Ok(Self {
            name: name.into(),
            remote,
            server_name: server.config.name.as_str().into(),
            server: Arc::downgrade(server),
            info: info(tool, parameters),
            schema: Arc::new(schema),
            breaker,
            output_schema: tool.output_schema.is_some(),
        })
    }

    /// The tool as a person or a model is shown it: its description and parameters (keys and
    /// strings, at any depth) with every secret value masked, since a server's text is a
    /// peer's and may echo one. Calls still go through the original.
    pub(crate) fn masked(self: &Arc<Self>, secrets: &Secrets) -> Arc<Self> {
        let mut info = self.info.clone();
        info.description = secrets.mask(&info.description).into_inner();
        info.parameters = secrets.mask_value(info.parameters).into_inner();
        Arc::new(Self {
            name: self.name.clone(),
            remote: self.remote.clone(),
            server_name: self.server_name.clone(),
            server: self.server.clone(),
            info,
            schema: self.schema.clone(),
            breaker: self.breaker.clone(),
            output_schema: self.output_schema,
        })
    }

    /// `<server>.<tool>`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name given to models that call tools natively, whose function names may not hold
    /// a `.`: `<server>__<tool>` (`everything__echo`). A call by that name finds this tool.
    pub fn native_name(&self) -> String {
        format!("{}__{}", self.server_name, self.remote)
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.server_name
    }

    /// Its metadata: description, `inputSchema` as parameters, risk and capabilities from its
    /// annotations.
    pub fn info(&self) -> &ToolInfo {
        &self.info
    }

    /// The state of its circuit breaker.
    pub fn breaker_state(&self) -> BreakerStatus {
        self.breaker.snapshot()
    }

    /// Why it cannot be called now (its breaker is open), if it cannot.
    pub fn unavailable(&self) -> Option<String> {
        match self.breaker.snapshot() {
            BreakerStatus::Open { until, last } => Some(format!(
                "circuit breaker open until {} (last failure: {last})",
                crate::governance::clock(until)
            )),
            _ => None,
        }
    }
}

/// The tool's metadata. Risk: `readOnlyHint` is `read`; anything else (`destructiveHint`
/// included) is `write`, which the policy may raise. `openWorldHint` gives the capability
/// `network`, `idempotentHint` the capability `idempotent` (so it may be retried).
fn info(tool: &Tool, parameters: serde_json::Value) -> ToolInfo {
    let hints = tool.annotations.as_ref();
    let hint = |pick: fn(&rmcp::model::ToolAnnotations) -> Option<bool>| {
        hints.and_then(pick).unwrap_or(false)
    };
    let mut info = ToolInfo::new(tool.description.as_deref().unwrap_or_default());
    info.parameters = parameters;
    info.timeout_seconds = DEFAULT_TIMEOUT_SECONDS;
    info.risk_level = match hint(|a| a.read_only_hint) {
        true => RiskLevel::Read,
        false => RiskLevel::Write,
    };
    if hint(|a| a.open_world_hint) {
        info.capabilities.push("network".to_owned());
    }
    if hint(|a| a.idempotent_hint) {
        info.capabilities.push("idempotent".to_owned());
    }
    info
}

/// `<server>.<tool>` for a native function name `<server>__<tool>` ([`McpTool::native_name`]).
pub(crate) fn from_native_name(name: &str) -> Option<String> {
    let (server, tool) = name.split_once("__")?;
    let ok = super::config::is_server_name(server) && !tool.is_empty();
    ok.then(|| format!("{server}.{tool}"))
}
