//! `test_input_required_result_multi_round`: asks a name, then a favourite colour. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};
use serde_json::{json, Value};

#[derive(Default)]
struct TwoSteps;

impl Tool for TwoSteps {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Asks a name, then a favourite colour.").risk(RiskLevel::Read)
    }

    async fn execute(&self, ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        let first = ctx
            .elicit_as("step1", "Step 1: What is your name?", schema)
            .await?;
        let schema = json!({"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]});
        let second = ctx
            .elicit_as("step2", "Step 2: What is your favorite color?", schema)
            .await?;
        let (first, second) = (
            first.content.unwrap_or_default(),
            second.content.unwrap_or_default(),
        );
        let name = first.get("name").and_then(Value::as_str).unwrap_or("?");
        let color = second.get("color").and_then(Value::as_str).unwrap_or("?");
        Ok(Response::text(format!("{name} likes {color}")))
    }
}

plugin_api::export_tool!(TwoSteps);
