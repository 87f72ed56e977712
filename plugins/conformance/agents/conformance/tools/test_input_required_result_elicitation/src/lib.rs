//! `test_input_required_result_elicitation`: asks the user for a name and greets them. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};
use serde_json::{json, Value};

#[derive(Default)]
struct Greeter;

impl Tool for Greeter {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Asks the user for a name and greets them.").risk(RiskLevel::Read)
    }

    async fn execute(&self, ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        let answer = ctx
            .elicit_as("user_name", "What is your name?", schema)
            .await?;
        let content = answer.content.unwrap_or_default();
        let name = content
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("stranger");
        Ok(Response::text(format!("Hello, {name}!")))
    }
}

plugin_api::export_tool!(Greeter);
