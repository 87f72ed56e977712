//! The `response` tool: the agent's final answer. It ends the message loop.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};
use serde_json::{json, Value};

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
        // Taken out of the arguments, not copied: a long answer is held once.
        let mut args = args.into_map();
        let text = match (args.remove("text"), args.remove("message")) {
            (Some(Value::String(text)), _) | (_, Some(Value::String(text))) => text,
            _ => String::new(),
        };
        if text.trim().is_empty() {
            return Err(ToolError::repairable(
                "the response tool needs a non-empty 'text' argument with your final answer",
            ));
        }
        Ok(Response::final_answer(text))
    }
}

plugin_api::export_tool!(ResponseTool);
