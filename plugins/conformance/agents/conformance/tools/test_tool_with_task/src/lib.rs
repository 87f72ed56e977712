//! `test_tool_with_task`: asks the user's name in `InputRequiredResult` rounds, then greets
//! them as a task (its calls must be tasks). A tool of the MCP conformance suite's server
//! (profile `conformance`, the Tasks extension's fixtures), written as any author would write it.

use std::time::Duration;

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};
use serde_json::{json, Value};

#[derive(Default)]
struct GreetAsTask;

impl Tool for GreetAsTask {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Asks for a name, then greets as a task.")
            .risk(RiskLevel::Read)
            .task_required(true)
            .input_before_task(true)
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
            .unwrap_or("stranger")
            .to_owned();
        // The long part, in the task.
        tokio::select! {
            () = ctx.cancelled() => Err(ToolError::intervention("cancelled")),
            () = tokio::time::sleep(Duration::from_millis(500)) => {
                Ok(Response::text(format!("Hello, {name}! (greeted in a task)")))
            }
        }
    }
}

plugin_api::export_tool!(GreetAsTask);
