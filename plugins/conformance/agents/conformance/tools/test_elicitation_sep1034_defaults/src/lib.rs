//! `test_elicitation_sep1034_defaults`: asks the user a form whose fields have defaults (SEP-1034). A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};
use serde_json::json;

#[derive(Default)]
struct TestElicitationSep1034Defaults;

impl Tool for TestElicitationSep1034Defaults {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Asks the user a form whose fields have defaults (SEP-1034).")
            .risk(RiskLevel::Read)
    }

    async fn execute(&self, ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": true},
            },
        });
        let answer = ctx.elicit("Please review your details", schema).await?;
        Ok(Response::text(format!(
            "Elicitation completed: action={}, content={}",
            json!(answer.action),
            json!(answer.content)
        )))
    }
}

plugin_api::export_tool!(TestElicitationSep1034Defaults);
