//! `greet`: greets someone by name, at once (never a task). A tool of the MCP conformance suite's server
//! (profile `conformance`, the Tasks extension's fixtures), written as any author would write it.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};
use serde_json::json;

#[derive(Default)]
struct Greet;

impl Tool for Greet {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Greets someone by name, at once (never a task).")
            .risk(RiskLevel::Read)
            .parameters(json!({
                "type": "object",
                "properties": {"name": {"type": "string", "description": "Who"}},
                "required": ["name"],
            }))
    }

    async fn execute(&self, _ctx: &Context, args: Args) -> Result<Response, ToolError> {
        Ok(Response::text(format!(
            "Hello, {}!",
            args.require_str("name")?
        )))
    }
}

plugin_api::export_tool!(Greet);
