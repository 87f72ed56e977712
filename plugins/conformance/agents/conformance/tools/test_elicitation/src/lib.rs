//! `test_elicitation`: asks the user for a name and an email address. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::{Context, Response, RiskLevel, ToolError, ToolInfo, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// The arguments of a call.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The message to show the user.
    message: String,
}

#[derive(Default)]
struct TestElicitation;

impl TypedTool for TestElicitation {
    type Args = Args;

    fn info(&self) -> ToolInfo {
        ToolInfo::new("Asks the user for a name and an email address.").risk(RiskLevel::Read)
    }

    async fn execute(&self, ctx: &Context, args: Args) -> Result<Response, ToolError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        });
        let answer = ctx.elicit(args.message, schema).await?;
        Ok(Response::text(format!(
            "User response: action={}, content={}",
            json!(answer.action),
            json!(answer.content)
        )))
    }
}

plugin_api::export_tool!(TestElicitation);
