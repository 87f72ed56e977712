//! The `response` tool: the agent's final answer. It ends the message loop.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};
use serde_json::json;

#[derive(Default)]
struct ResponseTool;

impl Tool for ResponseTool {
    fn info(&self) -> ToolInfo {
        // `text` is not `required` in the schema: `message` is read too, and the tool's own
        // error says what to pass.
        ToolInfo::new("Ends the task with a final answer for the user.")
            .parameters(json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "The final answer."}}
            }))
            .risk(RiskLevel::Read)
            // It ends an agent's loop: nothing an MCP client calls.
            .agent_only(true)
    }

    async fn execute(&self, _ctx: &Context, args: Args) -> Result<Response, ToolError> {
        let text = args
            .str("text")
            .or_else(|| args.str("message"))
            .unwrap_or_default();
        if text.trim().is_empty() {
            return Err(ToolError::repairable(
                "the response tool needs a non-empty 'text' argument with your final answer",
            ));
        }
        Ok(Response::final_answer(text))
    }
}

plugin_api::export_tool!(ResponseTool);
