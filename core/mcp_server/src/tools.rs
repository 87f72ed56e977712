//! A native tool as an MCP tool: its description, the JSON Schema of its arguments and
//! annotations from its risk level and capabilities.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value};

use plugin_api::RiskLevel;
use plugin_api::ToolInfo;
use toolhost::config::Access;
use toolhost::Host;

use crate::tasks::TASK_MIN_DEADLINE;

/// The tools `profile` may call now, as MCP tools, sorted by name. Tools the tools prompt
/// leaves out are left out here too: not ready, breaker open, or refused by the profile's
/// `[access]`; and the agent's own ([`agent_only`]).
pub(crate) fn list(host: &Host, profile: &str) -> Vec<Tool> {
    let config = host.config(profile).ok();
    host.list(profile)
        .tools
        .into_iter()
        .filter(|t| t.unavailable().is_none())
        .filter(|t| !agent_only(&t.name, t.info()))
        .filter(|t| {
            let capabilities = &t.info().capabilities;
            !config
                .as_ref()
                .is_some_and(|c| matches!(c.access(&t.name, capabilities), Access::Denied { .. }))
        })
        .map(|t| tool(&t.name, t.info()))
        .collect()
}

/// Whether a listed tool is read-only (its risk level is `read`).
pub(crate) fn is_read(tool: &Tool) -> bool {
    tool.annotations
        .as_ref()
        .and_then(|a| a.read_only_hint)
        .unwrap_or(false)
}

/// Whether a tool is the agent's alone, never offered to MCP clients: the `response` tool
/// (its answer ends an agent's loop) and any tool whose [`ToolInfo::agent_only`] says so.
pub(crate) fn agent_only(name: &str, info: &ToolInfo) -> bool {
    name == "response" || info.agent_only
}

/// Whether a `tools/call` of `request` reaches a tool this server offers (else it is an
/// unknown tool: a protocol error, not a call of the Unknown tool).
pub(crate) fn offered(agent: &toolhost::Agent, request: &str) -> bool {
    let Ok(name) = toolhost::ToolName::parse(request) else {
        return false;
    };
    let found = agent.host().resolve(agent.profile(), name.name());
    match &found.found {
        Some(found) => !agent_only(name.name(), found.handle.info()),
        None => name.name() != "response" && agent.has_tool(request),
    }
}

/// The `gen_ai.tool.name` a `tools/call` of `request` is counted under in the metrics: the
/// tool's name (without a `:method`) when the profile has it and offers it to MCP clients,
/// else [`UNKNOWN_TOOL`](toolhost::telemetry::metrics::UNKNOWN_TOOL): never a name as the
/// client sent it, so no client chooses the series.
pub(crate) fn metric_label(host: &Host, profile: &str, request: &str) -> String {
    let unknown = || toolhost::telemetry::metrics::UNKNOWN_TOOL.to_owned();
    let Ok(name) = toolhost::ToolName::parse(request) else {
        return unknown();
    };
    let found = host.resolve(profile, name.name());
    match &found.found {
        Some(found) if !agent_only(name.name(), found.handle.info()) => name.name().to_owned(),
        _ => unknown(),
    }
}

/// How long a call of `request` may run, every attempt included, when its calls become
/// tasks for a client that declares the Tasks extension: when its deadline (`[tools.<tool>]
/// timeout_seconds`, else its declared timeout) is at least [`TASK_MIN_DEADLINE`]. `None` for
/// a shorter deadline and for a tool this profile does not have.
pub(crate) fn task_deadline(host: &Host, profile: &str, request: &str) -> Option<TaskPlan> {
    let name = toolhost::ToolName::parse(request).ok()?;
    let found = host.resolve(profile, name.name());
    let info = found.found.as_ref()?.handle.info();
    let required = info.task_required;
    let declared = Duration::from_secs(info.timeout_seconds);
    let (timeout, retries) = match host.config(profile) {
        Ok(config) => (
            config.timeout(name.name(), declared),
            config.max_retries(name.name(), info.max_retries),
        ),
        Err(_) => (declared, info.max_retries),
    };
    (required || timeout >= TASK_MIN_DEADLINE).then(|| TaskPlan {
        deadline: timeout.saturating_mul(retries.saturating_add(1)),
        required,
        input_first: info.input_before_task,
    })
}

/// How a call that is to become a task becomes one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TaskPlan {
    /// How long it may run, every attempt.
    pub(crate) deadline: Duration,
    /// Every call of the tool must be a task ([`ToolInfo::task_required()`]).
    pub(crate) required: bool,
    /// It gathers input in rounds first ([`ToolInfo::input_before_task()`]).
    pub(crate) input_first: bool,
}

/// Whether every MCP call of the tool `request` must be a task ([`ToolInfo::task_required()`]).
pub(crate) fn task_required(host: &Host, profile: &str, request: &str) -> bool {
    let Ok(name) = toolhost::ToolName::parse(request) else {
        return false;
    };
    let found = host.resolve(profile, name.name());
    let required = found.found.as_ref().map(|f| f.handle.info().task_required);
    required.unwrap_or(false)
}

/// One tool: `inputSchema` is the declared parameters when they are an object schema, else
/// `{"type": "object"}`; `outputSchema` the declared output schema, when it is an object
/// schema.
pub(crate) fn tool(name: &str, info: &ToolInfo) -> Tool {
    let description = info.description.trim().to_owned();
    let tool = Tool::new(
        name.to_owned(),
        description,
        Arc::new(input_schema(&info.parameters)),
    )
    .with_annotations(annotations(info));
    match &info.output_schema {
        Some(Value::Object(schema)) if schema.get("type").is_some_and(|t| t == "object") => {
            let mut tool = tool;
            tool.output_schema = Some(Arc::new(schema.clone()));
            tool
        }
        _ => tool,
    }
}

/// The declared parameters as an object schema.
pub(crate) fn input_schema(parameters: &Value) -> Map<String, Value> {
    let mut schema = match parameters {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    match schema.get("type") {
        Some(kind) if kind == "object" => schema,
        // A schema of another type cannot describe an arguments object: not offered.
        Some(_) => Map::from_iter([("type".to_owned(), "object".into())]),
        None => {
            schema.insert("type".to_owned(), "object".into());
            schema
        }
    }
}

/// `read` -> read-only; `write` and `exec` -> destructive; `network` -> open world;
/// `idempotent` -> idempotent.
pub(crate) fn annotations(info: &ToolInfo) -> ToolAnnotations {
    let has = |tag: &str| info.capabilities.iter().any(|c| c == tag);
    let read = info.risk_level == RiskLevel::Read;
    let annotations = ToolAnnotations::new()
        .read_only(read)
        .open_world(has("network"));
    let annotations = if read {
        annotations
    } else {
        annotations.destructive(true)
    };
    if has("idempotent") {
        annotations.idempotent(true)
    } else {
        annotations
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn schemas_are_objects() {
        assert_eq!(
            Value::Object(input_schema(&json!({}))),
            json!({"type": "object"})
        );
        assert_eq!(
            Value::Object(input_schema(&Value::Null)),
            json!({"type": "object"})
        );
        let declared = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        assert_eq!(Value::Object(input_schema(&declared)), declared);
        let untyped = json!({"properties": {"a": {}}});
        let typed = json!({"type": "object", "properties": {"a": {}}});
        assert_eq!(Value::Object(input_schema(&untyped)), typed);
        assert_eq!(
            Value::Object(input_schema(&json!({"type": "string"}))),
            json!({"type": "object"})
        );
    }

    #[test]
    fn annotations_follow_risk_and_capabilities() {
        let read = annotations(&ToolInfo::new("r").risk(RiskLevel::Read));
        assert_eq!(read.read_only_hint, Some(true));
        assert_eq!(read.destructive_hint, None);
        assert_eq!(read.open_world_hint, Some(false));
        for risk in [RiskLevel::Write, RiskLevel::Exec] {
            let info = ToolInfo::new("w").risk(risk).capability("network");
            let hints = annotations(&info);
            assert_eq!(hints.read_only_hint, Some(false));
            assert_eq!(hints.destructive_hint, Some(true));
            assert_eq!(hints.open_world_hint, Some(true));
        }
    }
}
