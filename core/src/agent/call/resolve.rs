//! What a request resolves to: a library tool along the profile's layers, an MCP server's
//! tool, the built-in `parallel`, or the built-in Unknown tool; and the rules for it.

use std::sync::Arc;

use plugin_api::Response;
use plugin_api::ToolError;

use crate::agent::Agent;
use crate::governance::CallRules;
use crate::host::FoundTool;
use crate::layout::ToolName;
#[cfg(feature = "mcp")]
use crate::mcp::McpTool;
use crate::plugin::ToolHandle;
use crate::telemetry::ToolSpan;

/// The tool a request resolved to.
pub(crate) enum Target {
    /// A library tool, and the rules that govern its call.
    Library(Arc<ToolHandle>, CallRules),
    /// A tool of an MCP server, and the rules that govern its call.
    #[cfg(feature = "mcp")]
    Mcp(Arc<McpTool>, CallRules),
    /// No layer has the tool: the built-in Unknown tool answers.
    Unknown,
    /// The built-in `parallel` tool.
    Parallel,
}

impl Target {
    /// What the call's span says of the tool.
    pub(crate) fn describe(&self, span: &ToolSpan, root: &std::path::Path) {
        match self {
            Self::Library(tool, _) => {
                let layer = || tool.layer_label(root).to_owned();
                let sha256 = || tool.sha256();
                let risk = tool.info().risk_level;
                span.resolved(tool.shared_name(), layer, sha256, risk, tool.is_isolated());
            }
            #[cfg(feature = "mcp")]
            Self::Mcp(tool, _) => {
                let risk = tool.info.risk_level;
                let layer = || "mcp".to_owned();
                span.resolved(&tool.name, layer, || None, risk, false);
            }
            Self::Unknown => {}
            Self::Parallel => {
                let risk = plugin_api::RiskLevel::Read;
                span.resolved(&Arc::from("parallel"), String::new, || None, risk, false);
            }
        }
    }

    /// The rules of a governed tool (a library's or an MCP server's).
    pub(crate) fn rules(&self) -> Option<&CallRules> {
        match self {
            Self::Library(_, rules) => Some(rules),
            #[cfg(feature = "mcp")]
            Self::Mcp(_, rules) => Some(rules),
            Self::Unknown | Self::Parallel => None,
        }
    }
}

/// The tool `name` resolves to for `agent`: an MCP server's (waiting for one still
/// starting), else one along the layers. An MCP server starting, failed or down, or a tool
/// that cannot be loaded, is an error.
pub(crate) async fn resolve(agent: &Agent, name: &str) -> Result<Target, ToolError> {
    match mcp_target(agent, name).await {
        Ok(Some(target)) => Ok(target),
        Ok(None) => layer_target(agent, name),
        Err(e) => Err(e),
    }
}

/// Whether a call of `request` (`name` or `name:method`) reaches a tool of that name (see
/// [`Agent::has_tool`]).
pub(crate) fn has_tool(agent: &Agent, request: &str) -> bool {
    let Ok(request) = ToolName::parse(request) else {
        return false;
    };
    let name = request.name();
    name == "parallel"
        || agent.host.resolve(agent.profile(), name).found.is_some()
        || has_mcp_tool(agent, name)
}

/// Whether a ready MCP server of the profile offers the tool `name` (`<server>.<tool>` or
/// `<server>__<tool>`).
#[cfg(feature = "mcp")]
fn has_mcp_tool(agent: &Agent, name: &str) -> bool {
    let dotted = crate::mcp::from_native_name(name);
    let mcp = |tool: &Arc<McpTool>| *tool.name == *name || dotted.as_deref() == Some(&*tool.name);
    agent.host.mcp_tools(agent.profile()).iter().any(mcp)
}

/// Without the MCP client, no MCP server offers a tool.
#[cfg(not(feature = "mcp"))]
fn has_mcp_tool(_agent: &Agent, _name: &str) -> bool {
    false
}

/// The tool `name` resolves to along the layers: a library, the built-in `parallel`, or
/// the Unknown tool.
fn layer_target(agent: &Agent, name: &str) -> Result<Target, ToolError> {
    let resolution = agent.host.resolve(agent.profile(), name);
    Ok(match &resolution.found {
        Some(found) => library_target(agent, found)?,
        // The built-in `parallel` (a library named `parallel` replaces it).
        None if name == "parallel" => Target::Parallel,
        None => {
            if let Some(error) = resolution.skipped.first() {
                // Installed but unusable: say so, rather than "not found".
                return Err(ToolError::dependency(format!(
                    "tool '{name}' cannot be loaded: {error}"
                )));
            }
            match &agent.host.resolve(agent.profile(), "unknown").found {
                Some(found) => library_target(agent, found)?,
                None => Target::Unknown,
            }
        }
    })
}

/// The MCP tool `name` (`<server>.<tool>`) if a server of the profile offers it, waiting
/// for a server that is still starting (at most the call's deadline); `<server>__<tool>`
/// finds it too. A name with neither `.` nor `__` costs two byte searches.
#[cfg(feature = "mcp")]
async fn mcp_target(agent: &Agent, name: &str) -> Result<Option<Target>, ToolError> {
    let alias; // `server__tool`, as models that call tools natively name it
    let name = match name.contains('.') {
        true => name,
        false if !name.contains("__") => return Ok(None),
        false => match crate::mcp::from_native_name(name) {
            Some(dotted) => {
                alias = dotted;
                &alias
            }
            None => return Ok(None),
        },
    };
    let Ok(config) = agent.host.config(agent.profile()) else {
        return Ok(None); // the layers' lookup reports the mistake
    };
    let declared = std::time::Duration::from_secs(crate::mcp::DEFAULT_TIMEOUT_SECONDS);
    let wait = match config.timeout(name, declared) {
        d if d.is_zero() => std::time::Duration::from_secs(365 * 86_400),
        d => d,
    };
    let Some(tool) = agent.host.mcp_tool(agent.profile(), name, wait).await? else {
        return Ok(None);
    };
    let layer = format!("mcp:{}", tool.server()).into();
    let rules = CallRules::new(tool.name(), tool.info(), layer, config);
    Ok(Some(Target::Mcp(tool, rules)))
}

/// Without the MCP client, no MCP server offers a tool.
#[cfg(not(feature = "mcp"))]
async fn mcp_target(_agent: &Agent, _name: &str) -> Result<Option<Target>, ToolError> {
    Ok(None)
}

/// A library tool to call, with the rules for it. A mistake in the profile's config fails
/// the call with that mistake's one line.
fn library_target(agent: &Agent, found: &FoundTool) -> Result<Target, ToolError> {
    let tool = &found.handle;
    let config = agent
        .host
        .config(agent.profile())
        .map_err(|e| ToolError::dependency(e.to_string()))?;
    let layer = found.layer.kind.as_str().into();
    Ok(Target::Library(
        tool.clone(),
        CallRules::new(tool.name(), tool.info(), layer, config),
    ))
}

/// The built-in Unknown tool: names the missing tool and lists the available ones.
pub(crate) fn unknown_tool(agent: &Agent, name: &str) -> Response {
    Response::text(format!(
        "Tool {name} not found. Available tools:\n{}",
        agent.host.tools_prompt(agent.profile())
    ))
}
