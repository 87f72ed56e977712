//! `test_input_required_result_tampered_state`: asks the user to confirm; a changed requestState is refused. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};
use serde_json::{json, Value};

#[derive(Default)]
struct Confirm;

impl Tool for Confirm {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Asks the user to confirm; a changed requestState is refused.")
            .risk(RiskLevel::Read)
    }

    async fn execute(&self, ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
        // Its answer reaches the tool only through a requestState that verified.
        let answer = ctx.elicit_as("confirm", "Please confirm", schema).await?;
        let content = answer.content.unwrap_or_default();
        let ok = content.get("ok").and_then(Value::as_bool).unwrap_or(false);
        Ok(Response::text(format!(
            "state-ok: the requestState verified, confirmed: {ok}"
        )))
    }
}

plugin_api::export_tool!(Confirm);
