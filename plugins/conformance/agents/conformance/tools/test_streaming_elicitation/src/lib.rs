//! `test_streaming_elicitation`: asks the user for a name in the middle of a call. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};
use serde_json::{json, Value};

#[derive(Default)]
struct AsksMidway;

impl Tool for AsksMidway {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Asks the user for a name in the middle of a call.").risk(RiskLevel::Read)
    }

    async fn execute(&self, ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        ctx.set_progress("starting").await;
        let answer = ctx.elicit("What is your name?", json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})).await?;
        let content = answer.content.unwrap_or_default();
        let name = content
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("stranger");
        Ok(Response::text(format!("Hello, {name}!")))
    }
}

plugin_api::export_tool!(AsksMidway);
