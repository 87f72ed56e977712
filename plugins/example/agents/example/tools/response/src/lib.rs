//! The `example` profile's `response`: overrides the core one, signing the answer.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};

#[derive(Default)]
struct SignedResponse;

impl Tool for SignedResponse {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Ends the task with a final answer, signed by the agent.")
            .risk(RiskLevel::Read)
            // It ends an agent's loop: nothing an MCP client calls.
            .agent_only(true)
    }

    async fn execute(&self, ctx: &Context, args: Args) -> Result<Response, ToolError> {
        let text = args
            .str("text")
            .or_else(|| args.str("message"))
            .unwrap_or_default();
        if text.trim().is_empty() {
            return Err(ToolError::repairable("pass your final answer as 'text'"));
        }
        let profile = ctx.profile();
        Ok(Response::final_answer(format!(
            "{text}\n  -- {} (profile '{profile}')",
            ctx.agent_name()
        )))
    }
}

plugin_api::export_tool!(SignedResponse);
