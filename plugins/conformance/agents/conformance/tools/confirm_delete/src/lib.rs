//! `confirm_delete`: asks the user to confirm before deleting (a long call: its question comes through its task). A tool of the MCP conformance suite's server
//! (profile `conformance`, the Tasks extension's fixtures), written as any author would write it.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};
use serde_json::{json, Value};

#[derive(Default)]
struct ConfirmDelete;

impl Tool for ConfirmDelete {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Asks the user to confirm before deleting.")
            .risk(RiskLevel::Read)
            .timeout_seconds(120)
    }

    async fn execute(&self, ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        let schema = json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]});
        let answer = ctx.elicit("Delete it?", schema).await?;
        let content = answer.content.unwrap_or_default();
        let yes = content
            .get("confirm")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Ok(Response::text(if yes { "deleted" } else { "kept" }))
    }
}

plugin_api::export_tool!(ConfirmDelete);
