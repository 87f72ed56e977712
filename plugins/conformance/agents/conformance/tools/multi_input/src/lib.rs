//! `multi_input`: asks the user two questions at once (a long call: through its task). A tool of the MCP conformance suite's server
//! (profile `conformance`, the Tasks extension's fixtures), written as any author would write it.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};
use serde_json::json;

#[derive(Default)]
struct MultiInput;

impl Tool for MultiInput {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Asks the user two questions at once.")
            .risk(RiskLevel::Read)
            .timeout_seconds(120)
    }

    async fn execute(&self, ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        let schema = |field: &str| json!({"type": "object", "properties": {field: {"type": "string"}}, "required": [field]});
        let (first, second) = futures_util::future::join(
            ctx.elicit("Your first name?", schema("first")),
            ctx.elicit("Your last name?", schema("last")),
        )
        .await;
        let (first, second) = (first?.content, second?.content);
        Ok(Response::text(format!("{first:?} {second:?}")))
    }
}

plugin_api::export_tool!(MultiInput);
